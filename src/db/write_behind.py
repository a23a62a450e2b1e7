"""Writes a cycle need not wait for: queued, run in order beside the rest of the cycle, settled.

Retrieval's bookkeeping (reinforce the retrieved, contradict the near misses, access
times, co-access, recall outcomes; plan §3.8), the co-access of the memories placed in
context and the escalation decision's row (src/metacognition/escalation.py) change
nothing the cycle's answer is built from. Awaited where they arose, they
cost ~6 ms of a ~40 ms cycle at 100k memories; queued here, they start once the cycle
has read the weights it draws on (the context's identity rows, src/context/assembly.py),
run while the context is put together, the model thinks and the turn is logged, and the
loop settles them before its inner life, which reads weights (src/loop/cognitive_loop.py).

The writes run one after another in the order queued, never concurrently with each other
(two co-access upserts on overlapping pairs would only wait on each other, but the order
of weight changes stays what it was). `settle` waits for all of them and returns the
failures, each with the label it was queued under; a failure does not stop the writes
after it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

Write = Callable[[], Awaitable[object]]


class WriteBehind:
    """A cycle's deferred writes: `queue` them, `start` them, `settle` them."""

    def __init__(self) -> None:
        self._queued: list[tuple[str, Write]] = []
        self._task: asyncio.Task | None = None
        self._failures: list[tuple[str, BaseException]] = []

    def queue(self, label: str, write: Write) -> None:
        """Run `write()` after the writes queued before it (once started)."""
        self._queued.append((label, write))
        if self._task is not None:        # already started: chain it now
            self.start()

    def start(self) -> None:
        """Start what is queued, in a task that runs after any still running."""
        if not self._queued:
            return
        batch, self._queued = self._queued, []
        previous = self._task

        async def run() -> None:
            if previous is not None:
                await asyncio.wait([previous])
            for label, write in batch:
                try:
                    await write()
                except Exception as exc:   # reported by settle; the next write still runs
                    self._failures.append((label, exc))

        self._task = asyncio.create_task(run(), name="write-behind")

    async def settle(self) -> list[tuple[str, BaseException]]:
        """Start anything still queued, wait for every write; the failures (label, error)."""
        self.start()
        task, self._task = self._task, None
        if task is not None:
            await asyncio.shield(task)    # a cancelled cycle still lets its writes finish
        failures, self._failures = self._failures, []
        return failures

    @property
    def pending(self) -> bool:
        return bool(self._queued) or (self._task is not None and not self._task.done())
