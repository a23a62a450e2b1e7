"""Many HTTP API clients and the terminal at once, a SIGKILL in the middle, a restart
(issue 41 item 8): the driver behind tests/test_api_load.py (a small run) and
`python -m bench api_load` (20 clients and the terminal, 1,000 messages).

Each client sends its messages one after another, each the moment the previous one is
acknowledged (stored: the API answers once the line is durable), with its own
Idempotency-Key; a send cut by the kill is sent again, with the same key, to the next
run. The terminal's lines are written before the kill and are in the journal when it
comes. Then every message is waited for, and the run is judged from the database and
what both runs printed:

- lost: a message acknowledged (or sent again after the restart) that is not answered;
- twice: a journal line stored twice (its key twice), or a message whose reply was
  printed twice (the terminal's quiet line names the messages each API reply answers);
- order: a client's messages answered in another order than sent (answered_at per
  message: a combined turn answers several at once).
"""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import asyncpg

from tests.proc import READY, ROOT, agent_env
from tests.web_service import write_config

URL = re.compile(r"web view \(read-only\): (http://\S+/)")
QUIET = re.compile(r"^\(answered on the HTTP API, messages? ([\d, ]+)\)")


class Running:
    """`python -m src.main` with its output read as it comes (a full pipe would stall it)."""

    def __init__(self, dsn: str, config: Path):
        self.proc = subprocess.Popen([sys.executable, "-m", "src.main"], cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=agent_env(DATABASE_URL=dsn, MOLTBOT_CONFIG=str(config)))
        self.lines: list[str] = []
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self.ready.wait(180):
            self.proc.kill()
            raise AssertionError(f"the service did not start: {self.lines[-20:]}")
        self.url = next(m.group(1) for line in self.lines if (m := URL.search(line)))

    def _read(self) -> None:
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            if READY in line:
                self.ready.set()

    def type(self, lines: list[str]) -> None:
        self.proc.stdin.write("".join(f"{x}\n" for x in lines).encode())
        self.proc.stdin.flush()


@dataclass
class Client:
    n: int
    texts: list[str]
    keys: list[str] = field(default_factory=list)
    ids: list[int | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.keys = [str(uuid.uuid4()) for _ in self.texts]
        self.ids = [None] * len(self.texts)


@dataclass
class LoadResult:
    messages: int
    lost: list[int]
    twice: list[str]
    out_of_order: list[int]
    seconds: float
    runs: tuple[list[str], list[str]]


async def _send(http: aiohttp.ClientSession, url: str, text: str, key: str) -> int | None:
    """Sent and acknowledged: its journal id (None while the database held it); raises when cut."""
    async with http.post(f"{url}api/v1/messages", json={"text": text, "wait_s": 0},
                         headers={"Idempotency-Key": key}) as r:
        if r.status not in (200, 202):
            raise aiohttp.ClientResponseError(r.request_info, r.history, status=r.status)
        return (await r.json())["id"]


async def _client(http: aiohttp.ClientSession, client: Client, url: list[str], sent: list[int],
                  kill_at: int, killed: asyncio.Event, back: asyncio.Event) -> None:
    for i, (text, key) in enumerate(zip(client.texts, client.keys, strict=True)):
        while True:
            if killed.is_set() and not back.is_set():
                await back.wait()
            try:
                client.ids[i] = await _send(http, url[0], text, key)
                break
            except (TimeoutError, aiohttp.ClientError):
                await asyncio.sleep(0.2)       # the service is gone: the same key to the next run
        sent[0] += 1
        if sent[0] >= kill_at and not killed.is_set():
            killed.set()


async def run_load(dsn: str, folder: Path, *, clients: int, per_client: int, terminal: int,
                   kill_at: int | None = None) -> LoadResult:
    """`clients` API clients × `per_client` messages and `terminal` typed lines; SIGKILL once
    `kill_at` API messages are acknowledged (default: half), then a restart."""
    config = write_config(folder, settle=False)
    started = time.monotonic()
    first = Running(dsn, config)
    url = [first.url]
    typed = [f"Terminal line {j}: the lantern in room {j} is green." for j in range(terminal)]
    first.type(typed)
    crowd = [Client(n, [f"Client {n} message {j}: my locker {n}-{j} holds a blue scarf." for j in range(per_client)])
             for n in range(clients)]
    kill_at = kill_at if kill_at is not None else clients * per_client // 2
    killed, back, sent = asyncio.Event(), asyncio.Event(), [0]
    conn = await asyncpg.connect(dsn)
    second: Running | None = None
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
            tasks = [asyncio.create_task(_client(http, c, url, sent, kill_at, killed, back)) for c in crowd]
            await killed.wait()
            # the terminal's lines are durable before the kill (a line still in the pipe was never acknowledged)
            await _until(conn, "SELECT count(*) >= $1 FROM input_journal WHERE line LIKE 'Terminal line %'", terminal)
            first.proc.send_signal(signal.SIGKILL)
            await asyncio.to_thread(first.proc.wait)
            second = await asyncio.to_thread(Running, dsn, config)
            url[0] = second.url
            back.set()
            await asyncio.gather(*tasks)
            await _until(conn, "SELECT count(*) >= $1 FROM input_journal WHERE kind = 'message' AND state = 'answered'",
                         clients * per_client + terminal)
        result = await _judge(conn, crowd, typed, first, second)
    finally:
        await conn.close()
        if second is not None:
            second.proc.stdin.close()
            await asyncio.to_thread(second.proc.wait, 120)
    result.seconds = time.monotonic() - started
    return result


async def _until(conn: asyncpg.Connection, sql: str, *args: object, within_s: float = 900) -> None:
    """Until `sql` (one boolean) holds, or `within_s` passed (the judge then says what is missing)."""
    for _ in range(int(within_s / 0.2)):
        if await conn.fetchval(sql, *args):
            return
        await asyncio.sleep(0.2)


async def _judge(conn: asyncpg.Connection, crowd: list[Client], typed: list[str], first: Running,
                 second: Running) -> LoadResult:
    rows = await conn.fetch("SELECT id, line_key::text AS key, line, state, finished_at FROM input_journal "
                            "WHERE kind = 'message' ORDER BY id")
    by_key = {}
    twice = []
    for r in rows:
        if r["key"] in by_key:
            twice.append(f"key {r['key']} stored twice")
        by_key[r["key"]] = r
    lost = [r["id"] for r in rows if r["state"] != "answered"]
    lost += [-1 for c in crowd for k in c.keys if k not in by_key]          # acknowledged, not stored
    typed_rows = [r for r in rows if r["line"] in set(typed)]
    lost += [-2] * (len(typed) - len(typed_rows))
    printed: dict[int, int] = {}
    for line in first.lines + second.lines:
        if (m := QUIET.match(line)) is not None:
            for i in m.group(1).split(","):
                printed[int(i)] = printed.get(int(i), 0) + 1
    twice += [f"message {i} printed {n} times" for i, n in printed.items() if n > 1]
    out_of_order = []
    for c in crowd:
        times = [by_key[k]["finished_at"] for k in c.keys if k in by_key]
        if any(b < a for a, b in zip(times, times[1:], strict=False)):
            out_of_order.append(c.n)
    return LoadResult(len(rows), sorted(lost), twice, out_of_order, 0.0, (first.lines, second.lines))
