"""When the DMN ticks next (issue 24): slower while nothing new arrives.

An idle mind used to tick every `interval_s` all night, and every producing tick is a
cycle with model calls (measured: notes.md, "history and hot paths"). Wandering through the
same store again and again finds less each time, so while nothing new arrives the wait
between ticks grows by `rest_factor` per tick up to `rest_max_s`; anything new resets it
to `interval_s`. "New" is the user speaking (a user cycle in thought_log) or a memory
that is not the mind's own product: what the DMN, the gut, the mind's answers and
consolidation write comes from what it already had, and counting it would let the DMN
wake itself.

The DMN task still wakes every `interval_s` (src/db/availability.py's tick loop) and
asks `news` — two index lookups bounded by what arrived since the last wake — so a
conversation after a long rest brings it back within one interval.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from src.db.sql import Executor
from src.dmn.settings import DmnSettings

#: Memories the mind made from what it already had: not news.
OWN_SOURCES = ("internal_dmn", "internal_self", "internal_gut", "internal_consolidation")

# The newest memory id (the primary key's last entry), whether anything but the mind's own
# memories arrived after `$1` (a range of the primary key: only the rows since the last
# wake), and whether the user spoke after `$3` (idx_thought_log_at, the same).
_NEWS = """
SELECT (SELECT max(id) FROM memories) AS newest,
       EXISTS (SELECT 1 FROM memories WHERE id > $1 AND source_tag <> ALL($2::text[])) AS memory,
       EXISTS (SELECT 1 FROM thought_log WHERE at > $3 AND source_tag = 'external_user') AS user
"""


@dataclass
class Pacing:
    """The DMN's interval: `interval_s` after news, times `rest_factor` per quiet tick, at
    most `rest_max_s`. Pure: every rule takes `now`."""

    base_s: float
    factor: float
    max_s: float
    interval_s: float = field(init=False)    # the wait after the next tick
    wait_s: float = field(init=False)        # the wait after the last tick
    next_at: datetime | None = None          # None: due now
    rests: int = 0                           # wakes that found the DMN resting
    _seen_id: int | None = None
    _seen_at: datetime | None = None

    def __post_init__(self) -> None:
        self.interval_s = self.wait_s = self.base_s

    @classmethod
    def of(cls, settings: DmnSettings) -> Pacing:
        return cls(settings.interval_s, settings.rest_factor, max(settings.rest_max_s, settings.interval_s))

    def due(self, now: datetime) -> bool:
        return self.next_at is None or now >= self.next_at

    def news(self) -> None:
        """Something new arrived: back to the full rate, due now."""
        self.interval_s, self.next_at = self.base_s, None

    def ticked(self, now: datetime) -> None:
        """A tick ran at `now`: the next one an interval later, and the interval grows."""
        self.wait_s = self.interval_s
        self.next_at = now + timedelta(seconds=self.wait_s)
        self.interval_s = min(self.max_s, self.interval_s * self.factor)

    async def look(self, db: Executor, now: datetime) -> bool:
        """Did anything new arrive since the last look? (The first look counts as news.)"""
        first = self._seen_id is None
        row = await db.fetchrow(_NEWS, self._seen_id or 0, list(OWN_SOURCES), self._seen_at or now)
        self._seen_id, self._seen_at = row["newest"] or 0, now
        fresh = first or row["memory"] or row["user"]
        if fresh:
            self.news()
        return bool(fresh)

    async def step(self, db: Executor, now: datetime, tick: Callable[[datetime], Awaitable[object]]) -> object | None:
        """One wake of the DMN task: look for news, then `tick(now)` when due; None while resting."""
        await self.look(db, now)
        if not self.due(now):
            self.rests += 1
            return None
        report = await tick(now)
        self.ticked(now)
        return report

    def describe(self, now: datetime) -> str:
        """For /status: the current interval and when the next tick is due."""
        if self.next_at is None or self.due(now):
            return f"DMN: due to tick (every {self.base_s:.0f} s while something new arrives)"
        wait = (self.next_at - now).total_seconds()
        resting = "; resting: nothing new since it last ticked" if self.wait_s > self.base_s else ""
        return f"DMN: next tick in {wait:.0f} s{resting}"
