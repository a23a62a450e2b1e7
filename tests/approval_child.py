"""`/approve` in a child process that freezes at a chosen point, for the SIGKILL test.

    python -m tests.approval_child DSN APPROVAL_ID POINT MARKER

The child approves APPROVAL_ID through the queue the operator uses
(`approvals.decide_outcome`). At POINT it writes MARKER and blocks until it is killed:

- `applied`: the kind's apply function has returned (its writes are made) and the
  approval is not yet marked decided;
- `decided`: the approval is marked decided too, and the transaction not yet committed.

The freeze wraps the queue's `decide_approval`, so the code under test is the shipped one.
"""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import src.skills.consolidation  # noqa: F401  (registers the approval kind 'skill')
from src.consolidation.evolution import approvals, approvals_repository
from src.consolidation.evolution.approval_kinds import ApprovalContext
from src.consolidation.evolution.settings import EvolutionSettings
from src.db.pool import create_pool
from src.weights.safety import Safety

POINTS = ("applied", "decided")


def freeze_at(point: str, marker: Path) -> None:
    """Replace the queue's `decide_approval` by one that stops the process at `point`."""
    if point not in POINTS:
        raise SystemExit(f"point must be one of {POINTS}, not {point!r}")
    real = approvals_repository.decide_approval

    async def frozen(conn, *args) -> None:
        if point == "decided":
            await real(conn, *args)
        # written beside, then renamed: the parent must never see the file before its text
        partial = marker.with_suffix(".partial")
        partial.write_text(point)  # noqa: ASYNC240 - the parent waits for this file; the process freezes next
        partial.rename(marker)
        time.sleep(600)  # noqa: ASYNC251 - freeze the whole process: the parent kills it here

    approvals_repository.decide_approval = frozen


async def main(dsn: str, approval_id: str, point: str, marker: Path) -> None:
    freeze_at(point, marker)
    pool = await create_pool(dsn, min_size=1, max_size=2)
    ctx = ApprovalContext(pool, Safety(), EvolutionSettings(), datetime.now(UTC))
    print(await approvals.decide_outcome(ctx, approval_id, approve=True))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])))
