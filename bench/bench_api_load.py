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

import tempfile
from pathlib import Path

from bench.common import bench_database
from tests.api_load import run_load

CLIENTS, PER_CLIENT, TERMINAL = 20, 45, 100       # 1,000 messages


async def run() -> list[dict]:
    async with bench_database("bench_api_load") as dsn:
        with tempfile.TemporaryDirectory() as folder:
            result = await run_load(dsn, Path(folder), clients=CLIENTS, per_client=PER_CLIENT, terminal=TERMINAL)
    return [
        {"name": f"messages ({CLIENTS} API clients + the terminal, SIGKILL, restart)", "value": result.messages,
         "unit": "messages"},
        {"name": "lost", "value": len(result.lost), "unit": "messages"},
        {"name": "answered or stored twice", "value": len(result.twice), "unit": "messages"},
        {"name": "clients answered out of order", "value": len(result.out_of_order), "unit": "clients"},
        {"name": "throughput, restart included", "value": result.messages / result.seconds, "unit": "messages/s"},
    ]
