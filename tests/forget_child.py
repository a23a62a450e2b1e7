"""A forget in a child process that freezes at a chosen point, for the SIGKILL test.

    python -m tests.forget_child DSN MEMORY_ID POINT MARKER

The child forgets memory MEMORY_ID through src/erasure/forget.py. At POINT it writes
MARKER and blocks until it is killed:

- `removed`: the memories are deleted and the merges re-written, nothing scrubbed yet;
- `receipt`: every table is scrubbed and the receipt written, the transaction not committed.

The freeze wraps the forget's own steps (`scrub.scrub_tables`, `receipt.write`), so the code
under test is the shipped one.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from src.db.pool import create_pool
from src.erasure import matches, receipt, scrub
from src.erasure.forget import forget

POINTS = ("removed", "receipt")


def _freeze(point: str, marker: Path) -> None:
    partial = marker.with_suffix(".partial")
    partial.write_text(point)
    partial.rename(marker)
    time.sleep(600)  # freeze the whole process: the parent kills it here


def freeze_at(point: str, marker: Path) -> None:
    if point not in POINTS:
        raise SystemExit(f"point must be one of {POINTS}, not {point!r}")
    if point == "removed":
        real_scrub = scrub.scrub_tables

        async def frozen_scrub(*args, **kw):
            _freeze(point, marker)
            return await real_scrub(*args, **kw)

        scrub.scrub_tables = frozen_scrub
    else:
        real_write = receipt.write

        async def frozen_write(*args, **kw):
            out = await real_write(*args, **kw)
            _freeze(point, marker)
            return out

        receipt.write = frozen_write


async def main(dsn: str, memory_id: str, point: str, marker: Path) -> None:
    freeze_at(point, marker)
    pool = await create_pool(dsn, min_size=1, max_size=2)
    found, _ = await matches.by_ids(pool, [int(memory_id)])
    print(await forget(pool, None, found, who="cli"))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])))
