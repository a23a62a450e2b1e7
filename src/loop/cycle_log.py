"""Log (plan §3.4, the end of step 5): one thought_log row per cycle, written once.

The row, the input journal's `answered` mark for the turn's messages and the cycle's
gut delta go in one transaction (src/loop/thought_log.py), written *before* the reply
is printed (issue 26). Printed first, a SIGKILL between the print and the commit left
the messages `pending`, and the next start answered them a second time (SIGKILL
trials: notes.md, "Delivery once"). Exactly once is out of reach for a write to a pipe
and a commit; of the two orders this one never re-runs a turn: the only window left
is between the commit's acknowledgement and the write to stdout, and a reply lost
there is still in thought_log (`output`, the web view's /thoughts).

A turn that answers journaled messages is therefore never printed while its row
cannot be written: the entry is taken back and the error raised, the cycle counts as
failed before delivery, and its turn waits for the database (src/loop/outage.py
`DatabaseWait`). Any other cycle (an impulse, a message without a journal row) is
replayed by nothing: its row is written as before, after delivery and the aftermath
(milestone 10 marks an impulse's actions `aligned_with_values` there), and while the
database is away it waits here, in order, for the next cycle (or `Mind.close`,
through `flush`). Bounded: past `limit` the oldest entry is dropped with a warning.
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
from src.loop.attention_queue import Allocation
from src.loop.composing import Prompt
from src.loop.degraded import NoContext
from src.loop.thought_log import CycleRecord, log_answered_cycle
from src.loop.unkept import forget_lines

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
                 limit: int = 1000, on_answered: MarkAnswered | None = None):
        self.pool = pool
        self.session_id = session_id
        self.inner = inner
        self.limit = limit
        self.dropped = 0
        self.on_answered = on_answered     # the input journal's mark of a journaled turn
        self._entries: deque[CycleEntry] = deque()

    def __len__(self) -> int:
        return len(self._entries)

    def journaled(self, attended: Attended) -> bool:
        """The turn answers journaled messages: its row (with their answered mark) is written
        before the reply is printed, or the next start would answer them again."""
        return bool(attended.inputs.refs) and self.on_answered is not None

    async def write(self, record: CycleRecord, attended: Attended, prompt: Prompt, since: datetime) -> None:
        """Queue this cycle's row and write everything waiting, oldest first; the first failure
        propagates. A journaled turn's row is then taken back (its reply is not printed: the
        turn runs again); any other row stays queued for the next write."""
        also = list(self.inner.cycle_writes(record)) if self.inner is not None else []
        if record.winner.unkept and attended.inputs.refs:   # memory mode off: the answered lines' words go
            also.append(partial(forget_lines, ids=attended.inputs.refs))
        if len(self._entries) >= self.limit:
            lost = self._entries.popleft()
            self.dropped += 1
            log.warning("write backlog full (%d): dropped the oldest pending write (thought_log cycle %d)",
                        self.limit, lost.record.cycle)
        entry = CycleEntry(record, attended.allocation, prompt.assembled, since, attended.inputs.refs, also)
        self._entries.append(entry)
        try:
            await self.flush()
        except BaseException:
            # also when cancelled (shutdown): `Mind.close` must not mark it answered unprinted
            if self._marks(entry) and self._entries and self._entries[-1] is entry:
                self._entries.pop()
            raise

    async def flush(self) -> None:
        """Write the waiting rows oldest first; the first failure propagates and keeps the rest."""
        while self._entries:
            entry = self._entries[0]
            mark = (partial(self.on_answered, list(entry.refs), cycle=entry.record.cycle)
                    if self._marks(entry) else None)
            await log_answered_cycle(self.pool, mark, self.session_id, entry.record, entry.allocation,
                                     entry.assembled, since=entry.since, also=entry.also)
            self._entries.popleft()

    def _marks(self, entry: CycleEntry) -> bool:
        """The entry carries the journal's answered mark (a restart would answer its messages again)."""
        return bool(entry.refs) and self.on_answered is not None
