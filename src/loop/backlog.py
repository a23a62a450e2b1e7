"""Log (plan §3.4, the end of step 5): one thought_log row per cycle, written once.

The row and the input journal's `answered` mark for the turn's messages go in one
transaction (src/loop/thought_log.py), with the cycle's gut delta. They are written
after delivery; when the database is away at that moment the reply must not be sent
again (issue 11, Deliver 5) and the writes must not be lost either: they wait here,
in order, and the next cycle (or `Mind.close`, through `flush`) writes them. Bounded:
past `limit` the oldest entry is dropped with a warning (a journal row left `pending`
is then answered once more after a restart, never lost).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING

import asyncpg

from src.context.assembly import AssembledContext
from src.loop.attending import Attended
from src.loop.attention import Allocation
from src.loop.degraded import NoContext
from src.loop.prompting import Prompt
from src.loop.thought_log import CycleRecord, log_answered_cycle

if TYPE_CHECKING:
    from src.loop.inner_life import InnerLife

log = logging.getLogger(__name__)

MarkAnswered = Callable[..., Awaitable[None]]     # (journal ids, conn=): InputJournal.answered
ConnWrite = Callable[[asyncpg.Connection], Awaitable[object]]


@dataclass(frozen=True)
class CycleEntry:
    """One cycle's row as it waits to be written."""

    record: CycleRecord
    allocation: Allocation
    assembled: AssembledContext | NoContext
    since: datetime                 # the cycle's start: its llm_calls are summed from here
    refs: tuple[int, ...]           # input journal ids the reply answered
    also: Sequence[ConnWrite]       # more writes for the same transaction (the gut delta)


class CycleLog:
    """Ordered, bounded queue of cycle rows waiting for the database; written oldest first."""

    def __init__(self, pool: asyncpg.Pool, session_id: str, *, inner: InnerLife | None = None,
                 limit: int = 1000):
        self.pool = pool
        self.session_id = session_id
        self.inner = inner
        self.limit = limit
        self.dropped = 0
        self.on_answered: MarkAnswered | None = None   # set once the input journal is open
        self._entries: deque[CycleEntry] = deque()

    def __len__(self) -> int:
        return len(self._entries)

    async def write(self, record: CycleRecord, attended: Attended, prompt: Prompt, since: datetime) -> None:
        """Queue this cycle's row, then write everything waiting (the first failure propagates
        and keeps the rest)."""
        also = self.inner.cycle_writes(record) if self.inner is not None else ()
        if len(self._entries) >= self.limit:
            lost = self._entries.popleft()
            self.dropped += 1
            log.warning("write backlog full (%d): dropped the oldest pending write (thought_log cycle %d)",
                        self.limit, lost.record.cycle)
        self._entries.append(CycleEntry(record, attended.allocation, prompt.assembled, since,
                                        attended.inputs.refs, also))
        await self.flush()

    async def flush(self) -> None:
        """Write the waiting rows oldest first; the first failure propagates and keeps the rest."""
        while self._entries:
            entry = self._entries[0]
            mark = (partial(self.on_answered, list(entry.refs))
                    if entry.refs and self.on_answered is not None else None)
            await log_answered_cycle(self.pool, mark, self.session_id, entry.record, entry.allocation,
                                     entry.assembled, since=entry.since, also=entry.also)
            self._entries.popleft()
