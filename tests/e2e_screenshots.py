"""make e2e: every page of the web view in headless Chromium, saved as PNG screenshots.

Not part of `make test` (CI has no browser). Starts a real service on a fresh database
in the embedded test server, plays a scripted conversation (hostile content included),
stops it and starts it again (so the time axes show a restart), plays the rest and says two
lines on the chat page's form, then opens each page with Debian's `chromium` in a 1400 px wide window and writes data/e2e/<page>.png.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import sys
import tempfile
from pathlib import Path

import aiohttp
import asyncpg

from src.db.embedded import start_embedded
from tests.proc import agent_env
from tests.web_service import CONVERSATION, Service, post_chat, spawn_viewer

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "data" / "e2e"
DB = "moltbot_e2e"
MORE = [
    "The octopus named Olga escaped her tank again yesterday",
    "I am worried about a presentation to the research board next week",
    "On weekends I like to surf at Matosinhos beach",
    "Do you remember what I drink in the morning?",
    "The presentation is about how octopuses solve puzzles",
    "Marta is visiting Porto next month",
    "What is my sister's name?",
    "ok",
    "Thanks for listening, talk tomorrow",
]
#: Said on the chat page's form (the rest of the conversation was typed at the terminal).
CHAT = ["Hello from the chat page! Do you know where my sister lives?",
        "And <b>this</b> should show as typed, not bold."]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--window-size=1400,1800"]


async def _fresh_database(base_uri: str) -> str:
    admin = await asyncpg.connect(base_uri)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{DB}"')
    finally:
        await admin.close()
    head, _, query = base_uri.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{DB}?{query}"


def _size(path: Path) -> int:
    """Bytes of the PNG, 0 when Chromium wrote none."""
    return path.stat().st_size if path.exists() else 0


async def _screenshot(browser: str, url: str, target: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="moltbot-chromium-") as profile:
        proc = await asyncio.create_subprocess_exec(
            browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={target}", url,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(proc.communicate(), 120)
    if proc.returncode != 0 or _size(target) == 0:
        raise SystemExit(f"chromium could not screenshot {url}: {err.decode()[-500:]}")


async def _play(dsn: str, folder: Path) -> Service:
    """A first session, a restart, the rest of the conversation and a deep pass: the service still running."""
    first = Service(dsn, folder, settle=False)
    try:
        await first.converse(CONVERSATION)
    finally:
        first.stop()
    service = Service(dsn, folder, settle=False)      # a restart: a new session, cycles from 1 again
    try:
        for n, line in enumerate(MORE, len(CONVERSATION) + 1):
            service.say(line)
            await service.wait_cycles(n)
        await service.wait_for("SELECT count(*) >= 10 FROM memories")
        service.say("/consolidate")          # one deep pass, so /consolidation shows a real one
        await service.wait_for("SELECT count(*) >= 1 FROM consolidation_passes WHERE status <> 'running'")
        async with aiohttp.ClientSession() as http:     # the chat page's form, answered on /chat
            for line in CHAT:
                await post_chat(http, service.url, line)
                await service.wait_for("SELECT count(*) = 0 FROM input_journal "
                                       "WHERE kind = 'message' AND state = 'pending'")
    except BaseException:
        service.stop()
        raise
    return service


async def _shots(dsn: str) -> dict[str, str]:
    """Page name -> path: every page, a search, a bad id, two memories' own pages."""
    conn = await asyncpg.connect(dsn)
    try:
        hostile = await conn.fetchval("SELECT id FROM memories WHERE content LIKE '%owned%'")
        recalled = await conn.fetchval(
            "SELECT memory_id FROM consolidation_log WHERE actor = 'retrieval' "
            "GROUP BY memory_id ORDER BY count(*) DESC, memory_id LIMIT 1")
    finally:
        await conn.close()
    shots = {"overview": "/", "memories": "/memories", "search": "/memories?q=octopus+Olga",
             "bad-memory-id": "/memories/%C2%B2", "thoughts": "/thoughts", "gates": "/gates",
             "consolidation": "/consolidation", "gut": "/gut", "chat": "/chat"}
    if hostile is not None:
        shots["memory-hostile"] = f"/memories/{hostile}"
    if recalled is not None:
        shots["memory-recalled"] = f"/memories/{recalled}"
    return shots


async def _take(browser: str, base_url: str, shots: dict[str, str]) -> None:
    for name, path in shots.items():
        target = OUT / f"{name}.png"
        await _screenshot(browser, base_url + path, target)
        print(f"{target.relative_to(ROOT)}  {path}  {_size(target):,} bytes")


async def _paged(browser: str, dsn: str, folder: Path) -> None:
    """/memories page 2 from the standalone viewer at 6 rows a page (the conversation keeps
    fewer memories than the 100 a page the service shows)."""
    config = folder / "viewer.yaml"
    config.write_text(f"web: {{port: 0, page_rows: 6}}\nlayers: {{cache_dir: {folder / 'layers'}}}\n")
    viewer = spawn_viewer(agent_env(DATABASE_URL=dsn), "--config", str(config))
    try:
        line = viewer.stdout.readline().decode()
        match = re.search(r": (http://\S+/)$", line.strip())
        if match is None:
            raise SystemExit(f"the standalone viewer did not start: {line!r}")
        await _take(browser, match.group(1).rstrip("/"), {"memories-page2": "/memories?page=2"})
    finally:
        viewer.terminate()
        viewer.wait(timeout=30)


async def main() -> int:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("make e2e needs Chromium: apt-get install chromium", file=sys.stderr)
        return 1
    base, _ = start_embedded(ROOT / "data" / "test-pg")
    dsn = await _fresh_database(base)
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="moltbot-e2e-") as folder:
        service = await _play(dsn, Path(folder))
        try:
            await _take(browser, service.url.rstrip("/"), await _shots(dsn))
        finally:
            service.stop()
        await _paged(browser, dsn, Path(folder))
    # like `make test`'s, the server outlives the run (the next starts in milliseconds)
    print(f"screenshots in {OUT}; the test PostgreSQL in data/test-pg is left running (`make stop` stops it)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
