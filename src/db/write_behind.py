"""Writes a cycle need not wait for: queued, run in order beside the rest of the cycle, settled.

Retrieval's bookkeeping (reinforce the retrieved, contradict the near misses, access
times, co-access, recall outcomes; plan §3.8), the co-access of the memories placed in
context and the escalation decision's row (src/metacognition/escalation.py) change
nothing the cycle's answer is built from. Awaited where they arose, they
held the cycle (notes.md); queued here, they start once the cycle
has read the weights it draws on (the context's identity rows, src/context/assembly.py),
run while the context is put together, the model thinks and the turn is logged, and the
loop settles them at the cycle's end, or sooner where its inner life reads weights
(src/loop/cognitive_loop.py, src/loop/inner_life.py).

The writes of one lane run one after another in the order queued (the weight changes
are one lane, so their order stays what it was); lanes run side by side, each on its own
connection, so the cycle's end waits for the longest lane, not for the sum (the
bookkeeping, one statement after another, was its longest wait; measured: notes.md). The
context's co-access and the retrieval's (both upserts of sorted pairs) may wait on each
other's rows, never deadlock (the weights are locked FOR NO KEY UPDATE,
src/weights/apply.py). `settle` waits for all of them and returns the failures, each
with the label it was queued under; a failure does not stop the writes after it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

Write = Callable[[], Awaitable[object]]


class WriteBehind:
    """A cycle's deferred writes: `queue` them, `start` them, `settle` them."""

    def __init__(self) -> None:
        self._queued: dict[str, list[tuple[str, Write]]] = {}
        self._tasks: dict[str, asyncio.Task] = {}
        self._started = False
        self._failures: list[tuple[str, BaseException]] = []

    def queue(self, label: str, write: Write, *, lane: str = "") -> None:
        """Run `write()` after the writes queued before it in its `lane` (once started)."""
        self._queued.setdefault(lane, []).append((label, write))
        if self._started:                 # already started: chain it now
            self.start()

    def start(self) -> None:
        """Start what is queued: each lane in a task that runs after the lane's previous one."""
        self._started = True
        queued, self._queued = self._queued, {}
        for lane, batch in queued.items():
            self._tasks[lane] = asyncio.create_task(self._run(self._tasks.get(lane), batch),
                                                    name=f"write-behind {lane}".strip())

    async def _run(self, previous: asyncio.Task | None, batch: list[tuple[str, Write]]) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        for label, write in batch:
            try:
                await write()
            except Exception as exc:   # reported by settle; the next write still runs
                self._failures.append((label, exc))

    async def settle(self) -> list[tuple[str, BaseException]]:
        """Start anything still queued, wait for every write; the failures (label, error)."""
        self.start()
        tasks, self._tasks, self._started = list(self._tasks.values()), {}, False
        if tasks:
            await asyncio.shield(asyncio.gather(*tasks))   # a cancelled cycle still lets its writes finish
        failures, self._failures = self._failures, []
        return failures

    @property
    def pending(self) -> bool:
        return any(self._queued.values()) or any(not t.done() for t in self._tasks.values())
