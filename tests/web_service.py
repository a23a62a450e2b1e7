"""A real MoltBot service with its web view, driven by a scripted conversation (web tests, make e2e)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import asyncpg

from tests.proc import ROOT, agent_env, spawn_agent, wait_ready

URL_LINE = re.compile(r"^web view \(read-only\): (http://\S+/)$", re.M)
#: The chat form's hidden fields (src/web/chat_page.py): its Idempotency key and check token.
FORM_FIELD = re.compile(r'<input type=hidden name=(\w+) value="([^"]*)">')

HOSTILE = '<script>alert("owned")</script> octopus Olga \x1b[31mred\x1b[0m \u202eevil\u202c & "quotes"'
CONVERSATION = [
    "Hi, I'm Ana and I just moved to Porto for a new job",
    "I work as a marine biologist studying octopus behaviour",
    HOSTILE,
    "My sister Marta lives in Lisbon with her two cats",
    "What do you remember about the octopus Olga?",
    "I drink earl grey tea every morning before work",
]


def write_config(folder: Path, *, settle: bool = True, **web: object) -> Path:
    """runtime.yaml for a test service: seeded gates, the web view on a free port.

    `settle`: every exchange is flushed through the exit gate at once and the noise floor is
    off, so each message is a memory when its cycle ends (the web view, not the gate, is under
    test). Without it (make e2e) the gate runs as configured, noise flips included.
    """
    items = ", ".join(f"{k}: {v}" for k, v in {"port": 0, **web}.items())
    gates = "{seed: 7, scratch: {flush_every: 1}, exit: {noise_floor: 0.0}}" if settle else "{seed: 7}"
    path = folder / "runtime.yaml"
    path.write_text(f"gates: {gates}\nweb: {{{items}}}\nlayers: {{cache_dir: {folder / 'layers'}}}\n")
    return path


class Service:
    """`python -m src.main` on a fresh database, its web URL, and its stdin."""

    def __init__(self, dsn: str, folder: Path, *, settle: bool = True, **env: str):
        self.dsn = dsn
        config = write_config(folder, settle=settle)
        self.proc: subprocess.Popen = spawn_agent(agent_env(DATABASE_URL=dsn, MOLTBOT_CONFIG=str(config), **env))
        lines = wait_ready(self.proc, timeout=120)
        match = URL_LINE.search("\n".join(lines))
        if match is None:
            self.stop()
            raise AssertionError(f"no web view line in the start-up lines: {lines}")
        self.url = match.group(1)

    def say(self, line: str) -> None:
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()

    async def converse(self, lines: list[str], *, answered: int = 0) -> None:
        """One message per cycle: each waits for the loop's answer (messages sent together are
        answered as one turn). `answered`: cycles the service has run already."""
        for n, line in enumerate(lines, answered + 1):
            self.say(line)
            await self.wait_cycles(n)

    async def wait_cycles(self, n: int, within_s: float = 180) -> None:
        """Until thought_log holds n cycles (the loop answered every message)."""
        await self.wait_for("SELECT count(*) >= $1 FROM thought_log", n, within_s=within_s)

    async def wait_for(self, sql: str, *args: object, within_s: float = 180) -> None:
        """Until `sql` (returning one boolean) is true."""
        conn = await asyncpg.connect(self.dsn)
        try:
            deadline = time.monotonic() + within_s
            while time.monotonic() < deadline:
                if await conn.fetchval(sql, *args):
                    return
                await asyncio.sleep(0.2)
            raise AssertionError(f"not true within {within_s}s: {sql} {args}")
        finally:
            await conn.close()

    def stop(self) -> tuple[str, str]:
        """End of input: the agent finishes and exits; return its stdout and stderr."""
        out, err = self.proc.communicate(timeout=60)
        return out.decode(), err.decode()


def spawn_viewer(env: dict[str, str], *args: str) -> subprocess.Popen:
    """`python -m src.web` as the guardian would start it."""
    return subprocess.Popen([sys.executable, "-m", "src.web", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


async def post_chat(http: aiohttp.ClientSession, base_url: str, text: str) -> None:
    """Send `text` as a browser does from the chat page: the form as GET /chat shows it, posted
    with the page's Origin; the answer is the redirect back to the conversation."""
    base = base_url.rstrip("/")
    async with http.get(f"{base}/chat?reload=off") as r:
        fields = dict(FORM_FIELD.findall(await r.text()))
    async with http.post(f"{base}/chat", data={**fields, "text": text}, headers={"Origin": base},
                         allow_redirects=False) as r:
        if (r.status, r.headers.get("Location")) != (303, "/chat"):
            raise AssertionError(f"the chat page did not take {text!r}: {r.status} {(await r.text())[-300:]}")
