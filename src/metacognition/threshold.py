"""The adaptive escalation threshold of plan §3.5, read from the store.

    threshold = 0.3 + 0.5 · (min(1, memories / agent.maturity_memories) + identity_density) / 2

`identity_density` is the mean center of the memories whose center exceeds 0.7
(0 when none do); the formula itself is `relevance.escalation_threshold`. As the
identity settles the threshold rises and System 1 escalates less; an identity
upheaval (weights revised down) lowers it again, and more goes to System 2.

The same background read takes §3.5's retry success rate over the newest decisions
(`escalations`): while retries have rarely reached the threshold (`RetryRule`), System 1's
one retry is skipped and a low-confidence draft goes to System 2 at once.

The immutable memories (the safety boundaries, seeded at Beta(50, 1), center 0.98) are
counted but are not identity density: they are given, not formed by experience, and
never move. Counted, they put the density at 0.98 from the first day, so the
threshold stood at ~0.8 once 1,000 memories existed and an answer with a PARTIAL feeling
of knowing could never reach it (issue 24: every bench turn escalated; notes.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

from src.metacognition.escalation_log import escalation_stats
from src.recall.relevance import escalation_threshold
from src.recall.settings import MATURITY_MEMORIES

log = logging.getLogger(__name__)

# The count from the trigger-kept center summary (sql/080), the density from the center
# index of memory_standing (sql/141): only the identity band is read, never every memory.
IDENTITY_SQL = """
SELECT (SELECT COALESCE(sum(memories), 0) FROM memory_center_summary)::bigint AS total,
       COALESCE(avg(center), 0) AS density
  FROM memory_standing WHERE center > $1::float8 AND NOT immutable
"""


@dataclass(frozen=True)
class RetryRule:
    """When System 1's retry is worth asking (`metacognition.escalation.retry_*`)."""

    window: int = 200
    min_retries: int = 20
    min_success: float = 0.1

    def pays(self, retries: int, rate: float | None) -> bool:
        """Asked until `min_retries` retries give a rate worth judging, then while at least
        `min_success` of them reached the threshold."""
        return retries < self.min_retries or rate is None or rate >= self.min_success


@dataclass(frozen=True)
class ThresholdReading:
    total_memories: int
    identity_density: float
    threshold: float
    retries: int = 0                 # retries among the newest decisions (RetryRule.window)
    retry_successes: int = 0         # of them, those that reached the threshold
    retry_pays: bool = True          # the retry is asked (see RetryRule)


async def read_threshold(pool: asyncpg.Pool | asyncpg.Connection, *, identity_center: float = 0.7,
                         maturity_memories: int = MATURITY_MEMORIES, retry: RetryRule = RetryRule()) -> ThresholdReading:
    """Memory count and identity density in one statement, and the threshold they give.

    A full scan of `memories` (fillfactor 50 makes the heap large: notes.md has its
    cost). No index can serve it without costing every weight update
    its HOT path, so EscalationThreshold reads it in the background.
    """
    row = await pool.fetchrow(IDENTITY_SQL, identity_center)
    total, density = int(row["total"]), min(1.0, max(0.0, float(row["density"])))
    # §3.5's retry success rate (src/metacognition/escalation_log.py) over the newest decisions
    tried = await escalation_stats(pool, newest=retry.window)
    return ThresholdReading(total, density, escalation_threshold(total, density, maturity_memories),
                            tried.retries, tried.retry_successes,
                            retry.pays(tried.retries, tried.retry_success_rate))


class EscalationThreshold:
    """The current threshold without putting its scan on the cycle's path.

    The first call reads it; afterwards a reading older than `refresh_s` (clock
    injected) is returned as is while a background task reads a fresh one
    (stale-while-revalidate). The threshold moves with maturity, over hours, so a
    reading a minute old is as good as a new one. A failed refresh keeps the old
    reading and is logged.
    """

    def __init__(self, pool: asyncpg.Pool, *, refresh_s: float = 60.0, identity_center: float = 0.7,
                 maturity_memories: int = MATURITY_MEMORIES, clock: Callable[[], float] = time.monotonic,
                 retry: RetryRule = RetryRule()):
        self.pool = pool
        self.retry = retry
        self.refresh_s = refresh_s
        self.identity_center = identity_center
        self.maturity_memories = maturity_memories
        self.clock = clock
        self._reading: ThresholdReading | None = None
        self._read_at = -math.inf
        self.refreshing: asyncio.Task | None = None

    async def current(self) -> ThresholdReading:
        if self._reading is None:
            return await self.refresh()
        stale = self.clock() - self._read_at >= self.refresh_s
        if stale and (self.refreshing is None or self.refreshing.done()):
            self.refreshing = asyncio.create_task(self._refresh_quietly(), name="threshold-refresh")
        return self._reading

    async def refresh(self) -> ThresholdReading:
        reading = await read_threshold(self.pool, identity_center=self.identity_center,
                                       maturity_memories=self.maturity_memories, retry=self.retry)
        if self._reading is not None and reading.retry_pays != self._reading.retry_pays:
            log.info("System 1's retry %s: %d of the last %d retries reached the threshold",
                     "resumes" if reading.retry_pays else "is skipped", reading.retry_successes, reading.retries)
        self._reading, self._read_at = reading, self.clock()
        return reading

    async def _refresh_quietly(self) -> None:
        try:
            await self.refresh()
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
            log.warning("escalation threshold refresh failed, keeping %.3f: %s",
                        self._reading.threshold if self._reading else float("nan"), exc)

    async def aclose(self) -> None:
        """Cancel a refresh in flight (at shutdown)."""
        if self.refreshing is not None and not self.refreshing.done():
            self.refreshing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.refreshing


__all__ = ["IDENTITY_SQL", "EscalationThreshold", "ThresholdReading", "read_threshold"]
