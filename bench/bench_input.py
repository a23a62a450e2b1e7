"""Durable input under load (issue 11's benchmark), with the real process.

    python -m bench input

- burst: 2,000 lines written to stdin at once; lines/s until all are in input_journal.
- flood: 1,000 piped messages answered by an instant fake model (a local
  OpenAI-compatible endpoint on 127.0.0.1 that answers every request at once):
  cycles/s, p50/p95 cycle time from thought_log, peak RSS of the process.
- outage: the database refuses connections for 10 s while a message waits; time from
  the database being back to the first answer on stdout.

Own database on the embedded test server (bench/common.py), dropped at the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import asyncpg

from bench.common import ROOT, bench_pool, dsn_for
from src.db.embedded import start_embedded
from tests.proc import set_outage

READY = "Type /help for commands."
BURST, FLOOD, OUTAGE_S = 2000, 1000, 10.0
_REPLY = json.dumps({"id": "c1", "object": "chat.completion", "choices": [{
    "index": 0, "finish_reason": "stop",
    "message": {"role": "assistant", "content": '{"judgement": "KNOWN", "confidence": 0.9}'}}],
    "usage": {"prompt_tokens": 9, "completion_tokens": 3}}).encode()


class _Instant(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - the http.server hook
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(_REPLY)))
        self.end_headers()
        self.wfile.write(_REPLY)

    def log_message(self, *args):
        pass


def _env(dsn: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")}
    env["DATABASE_URL"] = dsn
    return env


def _spawn(dsn: str, config: Path | None = None) -> subprocess.Popen:
    args = [sys.executable, "-m", "src.main", *(["--config", str(config)] if config else [])]
    # stderr joins stdout: the ready line is a start-up line, on stderr when stdout is a pipe
    return subprocess.Popen(args, cwd=ROOT, env=_env(dsn), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _wait_line(proc: subprocess.Popen, needle: str, timeout: float = 120) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode()
        if not line:
            raise RuntimeError(f"agent ended before printing {needle!r}")
        if needle in line:
            return time.monotonic()
    raise RuntimeError(f"{needle!r} not printed within {timeout} s")


def _lines(n: int, what: str) -> bytes:
    return "".join(f"{what} {i:05d}: the octopus moved to the next tide pool\n" for i in range(n)).encode()


async def _burst(dsn: str) -> list[dict]:
    proc = _spawn(dsn)
    try:
        await asyncio.to_thread(_wait_line, proc, READY)
        conn = await asyncpg.connect(dsn)
        try:
            started = time.perf_counter()
            proc.stdin.write(_lines(BURST, "burst"))
            proc.stdin.flush()
            admitted = 0
            while admitted < BURST:   # polled: the journal is in another process
                await asyncio.sleep(0.005)
                admitted = await conn.fetchval("SELECT count(*) FROM input_journal")
            seconds = time.perf_counter() - started
        finally:
            await conn.close()
    finally:
        proc.kill()
        proc.wait()
    return [{"name": f"burst of {BURST:,} lines: admitted to input_journal", "value": BURST / seconds,
             "unit": "lines/s"}]


async def _flood(dsn: str, tmp: Path) -> list[dict]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Instant)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = tmp / "runtime.yaml"
    config.write_text(
        f"providers:\n  llm: {{provider: openai_compat, base_url: 'http://127.0.0.1:{server.server_address[1]}/v1', "
        "openai_model: instant-1}\n"
        f"layers: {{values_path: {tmp / 'v.json'}, goals_path: {tmp / 'g.json'}, cache_dir: {tmp / 'cache'}}}\n")
    try:
        proc = _spawn(dsn, config)
        started = time.perf_counter()
        proc.stdin.write(_lines(FLOOD, "flood"))
        proc.stdin.close()
        drain = threading.Thread(target=proc.stdout.read, daemon=True)
        drain.start()
        _, _, usage = await asyncio.to_thread(os.wait4, proc.pid, 0)
        proc.returncode = 0
        wall = time.perf_counter() - started
    finally:
        server.shutdown()
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(
            """SELECT count(*) AS cycles, EXTRACT(EPOCH FROM max(at) - min(at)) AS span,
                      percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50,
                      percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95
                 FROM thought_log""")
        calls = await conn.fetchval("SELECT count(*) FROM llm_calls WHERE ok")
        unanswered = await conn.fetchval(
            "SELECT count(*) FROM input_journal WHERE line LIKE 'flood %' AND state <> 'answered'")
    finally:
        await conn.close()
    return [
        {"name": f"flood of {FLOOD:,} piped messages: wall time to exit", "value": wall, "unit": "s"},
        {"name": "flood: cycles (combined turns)", "value": int(row["cycles"]), "unit": "cycles"},
        {"name": "flood: cycles per second", "value": row["cycles"] / max(float(row["span"]), 1e-9),
         "unit": "cycles/s"},
        {"name": "flood: cycle time p50", "value": float(row["p50"]), "unit": "ms"},
        {"name": "flood: cycle time p95", "value": float(row["p95"]), "unit": "ms"},
        {"name": "flood: messages left unanswered", "value": int(unanswered), "unit": "messages"},
        {"name": "flood: model calls answered by the fake", "value": int(calls), "unit": "calls"},
        {"name": "flood: peak RSS", "value": usage.ru_maxrss / 1024.0, "unit": "MB"},
    ]


async def _outage(admin_uri: str, db: str, dsn: str) -> list[dict]:
    proc = _spawn(dsn)
    try:
        await asyncio.to_thread(_wait_line, proc, READY)
        await set_outage(admin_uri, db, on=True)
        try:
            proc.stdin.write(b"are you still there while the database is away?\n")
            proc.stdin.flush()
            await asyncio.to_thread(_wait_line, proc, "database unavailable: your input is held")
            await asyncio.sleep(OUTAGE_S)
        finally:
            await set_outage(admin_uri, db, on=False)
        back = time.monotonic()
        answered = await asyncio.to_thread(_wait_line, proc, "(reflex mode")
    finally:
        proc.kill()
        proc.wait()
    return [{"name": f"outage of {OUTAGE_S:g} s: database back -> first answer", "value": answered - back,
             "unit": "s"}]


async def run() -> list[dict]:
    uri, _ = start_embedded(ROOT / "data" / "test-pg")
    rows: list[dict] = []
    for label, step in (("burst", _burst), ("flood", None), ("outage", None)):
        async with bench_pool(f"bench_input_{label}"):
            name = f"bench_input_{label}_{os.getpid()}"
            dsn = dsn_for(uri, name)
            if label == "burst":
                rows += await step(dsn)
            elif label == "flood":
                with tempfile.TemporaryDirectory() as tmp:
                    rows += await _flood(dsn, Path(tmp))
            else:
                rows += await _outage(uri, name, dsn)
    return rows
