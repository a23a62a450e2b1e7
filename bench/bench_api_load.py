"""Twenty HTTP API clients and the terminal at once, 1,000 messages, a SIGKILL in the middle,
a restart (issue 41 item 8), with the real process in reflex mode (no model: the loop, the
journal and the API are what is measured).

    python -m bench api_load

Reports lost, twice and out-of-order messages (each must be 0; tests/api_load.py says how
each is judged) and the messages answered a second over the whole run, restart included.
The same driver runs at a small size in tests/test_api_load.py. Own database on the
embedded test server (bench/common.py), dropped at the end.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import asyncpg

from bench.common import ROOT, dsn_for
from src.db.embedded import start_embedded
from src.db.migrations import apply_migrations
from tests.api_load import run_load

CLIENTS, PER_CLIENT, TERMINAL = 20, 45, 100       # 1,000 messages


async def run() -> list[dict]:
    uri, _ = start_embedded(ROOT / "data" / "test-pg", shared_buffers="auto")
    name = f"bench_api_load_{os.getpid()}"
    admin = await asyncpg.connect(uri)
    await admin.execute(f'CREATE DATABASE "{name}"')      # a constant and our pid, not input
    try:
        conn = await asyncpg.connect(dsn_for(uri, name))
        try:
            await apply_migrations(conn)
        finally:
            await conn.close()
        with tempfile.TemporaryDirectory() as folder:
            result = await run_load(dsn_for(uri, name), Path(folder), clients=CLIENTS, per_client=PER_CLIENT,
                                    terminal=TERMINAL)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
    return [
        {"name": f"messages ({CLIENTS} API clients + the terminal, SIGKILL, restart)", "value": result.messages,
         "unit": "messages"},
        {"name": "lost", "value": len(result.lost), "unit": "messages"},
        {"name": "answered or stored twice", "value": len(result.twice), "unit": "messages"},
        {"name": "clients answered out of order", "value": len(result.out_of_order), "unit": "clients"},
        {"name": "throughput, restart included", "value": result.messages / result.seconds, "unit": "messages/s"},
    ]
