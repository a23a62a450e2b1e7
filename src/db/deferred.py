"""A write a step hands back instead of doing: the bookkeeping a turn need not wait for.

Recall's mutation (plan §3.8), the co-access of the memories placed in context and the
escalation decision's row change nothing the turn's answer is built from. The step that
knows them returns them as `Deferred` values (`Retrieval.writes`, `AssembledContext.writes`,
`EscalationOutcome.writes`); the loop's cycle queues them on the turn's tasks
(src/loop/turn_tasks.py) where it can be read, and a caller outside the loop (the memory
CLI's `search --mutate`) runs them with `run_now`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

Write = Callable[[], Awaitable[object]]


@dataclass(frozen=True)
class Deferred:
    """One write: what it is (`label`, said when it fails), the call, and its lane (writes of
    one lane run in the order queued; lanes run side by side)."""

    label: str
    write: Write
    lane: str = ""


async def run_now(writes: Iterable[Deferred]) -> None:
    """Run `writes` one after another, here (a caller with no turn to queue them on)."""
    for deferred in writes:
        await deferred.write()
