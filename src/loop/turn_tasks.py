"""Every background task of one turn, held by one owner and collected before the turn ends.

The cycle (src/loop/cognitive_loop.py) makes one `TurnTasks` per turn. Two kinds of work
run beside the turn:

- the deferred writes its steps hand back (src/db/deferred.py): retrieval's bookkeeping
  (reinforce the retrieved, contradict the near misses, access times, co-access, recall
  outcomes; plan §3.8), the co-access of the memories placed in context and the
  escalation decision's row. They change nothing the turn's answer is built from;
  awaited where they arose, they held the cycle (notes.md). The cycle queues them
  (`queue`) and starts them once the turn has read the weights it draws on (`start_after`
  the context's identity rows, src/context/assembly.py): they run while the context is
  put together, the model thinks and the turn is logged;
- reads started early (the prompt's reads, src/loop/composing.py) and work beside a step
  (which memories the answer drew on, src/loop/aftermath.py): `spawn`, collected by
  `settle` (awaited when still wanted, cancelled with `cancel_spawned`).

The writes of one lane run one after another in the order queued (the weight changes are
one lane, so their order stays what it was); lanes run side by side, each on its own
connection, so the turn's end waits for the longest lane, not for the sum. The context's
co-access and the retrieval's (both upserts of sorted pairs) may wait on each other's
rows, never deadlock (the weights are locked FOR NO KEY UPDATE, src/weights/apply.py).
`settle` waits for all of them and returns the failures, each with the label it was
queued under; a failure does not stop the writes after it. A turn's task is never left
running after its cycle: the test that follows one turn holds this
(tests/test_turn_tasks.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

from src.db.deferred import Deferred

T = TypeVar("T")


class TurnTasks:
    """One turn's deferred writes and spawned tasks: `queue`/`spawn` them, `settle` them."""

    def __init__(self) -> None:
        self._queued: dict[str, list[Deferred]] = {}
        self._lanes: dict[str, asyncio.Task] = {}
        self._spawned: list[asyncio.Future] = []
        self._started = False
        self._failures: list[tuple[str, BaseException]] = []

    # -- deferred writes ---------------------------------------------------------------
    def queue(self, *writes: Deferred) -> None:
        """Run each write after the writes queued before it in its lane (once started)."""
        for deferred in writes:
            self._queued.setdefault(deferred.lane, []).append(deferred)
        if self._started and writes:     # already started: chain them now
            self.start()

    def start(self) -> None:
        """Start what is queued: each lane in a task that runs after the lane's previous one."""
        self._started = True
        queued, self._queued = self._queued, {}
        for lane, batch in queued.items():
            self._lanes[lane] = asyncio.create_task(self._run(self._lanes.get(lane), batch),
                                                    name=f"turn writes {lane}".strip())

    def start_after(self, read: Awaitable[Any] | None) -> None:
        """Start the writes once `read` is done (whatever its outcome); now when None."""
        if read is None:
            self.start()
            return
        asyncio.ensure_future(read).add_done_callback(lambda _: self._started or self.start())

    async def _run(self, previous: asyncio.Task | None, batch: list[Deferred]) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        for deferred in batch:
            try:
                await deferred.write()
            except Exception as exc:   # reported by settle; the next write still runs
                self._failures.append((deferred.label, exc))

    # -- spawned tasks -----------------------------------------------------------------
    def spawn(self, work: Coroutine[Any, Any, T], name: str) -> asyncio.Task[T]:
        """Run `work` beside the turn; it is collected by `settle` whatever happens."""
        task = asyncio.ensure_future(work)
        task.set_name(f"turn {name}")
        self._spawned.append(task)
        return task

    def cancel_spawned(self) -> None:
        """The turn will not use what it spawned (it failed, or gives up its reads)."""
        for task in self._spawned:
            task.cancel()

    # -- the end of the turn -------------------------------------------------------------
    async def settle(self) -> None:
        """Start anything still queued, wait for every write and spawned task. The writes'
        failures wait for `failures`; a spawned task's own failure was its step's to handle:
        here it is only collected (no "exception never retrieved")."""
        self.start()
        lanes, self._lanes, self._started = list(self._lanes.values()), {}, False
        spawned, self._spawned = self._spawned, []
        if lanes:
            await asyncio.shield(asyncio.gather(*lanes))   # a cancelled cycle still lets its writes finish
        if spawned:
            await asyncio.gather(*spawned, return_exceptions=True)

    def failures(self) -> list[tuple[str, BaseException]]:
        """The writes that failed since last asked (label, error)."""
        failures, self._failures = self._failures, []
        return failures

    @property
    def pending(self) -> bool:
        return (any(self._queued.values()) or any(not t.done() for t in self._lanes.values())
                or any(not t.done() for t in self._spawned))
