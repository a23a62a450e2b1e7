"""One WARNING when the database goes away and one when it is back — never a traceback
per failed statement (issue 11: an outage must degrade, not flood stderr). And waiting
for it: a turn that failed because the database is away waits for its return and is
answered in the same run (`DatabaseWait`, issue 26)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import asyncpg

from src.db.availability import describe
from src.db.pool import DB_ERRORS

log = logging.getLogger(__name__)

__all__ = ["DB_ERRORS", "DatabaseWait", "Outage", "describe"]

#: Longest pause between two probes of an absent database: a probe is one `SELECT 1`,
#: and the turns waiting for it should be answered within a moment of its return.
PROBE_MAX_S = 2.0


class Outage:
    """Tracks whether the database is away; logs the edges, counts what failed between."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self.since: float | None = None
        self.failures = 0
        self.outages = 0

    @property
    def active(self) -> bool:
        return self.since is not None

    def down(self, where: str, exc: BaseException) -> None:
        """A database call failed in `where`; the first failure of an outage is logged."""
        self.failures += 1
        if self.since is None:
            self.since = self._clock()
            self.outages += 1
            log.warning("database unavailable in %s: %s; holding input and retrying with backoff",
                        where, describe(exc))

    def up(self, where: str) -> None:
        """A database call succeeded in `where`; ends an outage (logged once)."""
        if self.since is None:
            return
        seconds = self._clock() - self.since
        log.warning("database available again (%s) after %.1f s; %d call(s) failed meanwhile",
                    where, seconds, self.failures)
        self.since = None
        self.failures = 0


class DatabaseWait:
    """Whether the database answers now, and waiting until it does.

    A cycle that failed on the database used to spend its retry budget (0.5 + 1 + 2 s)
    and give its turn up for the next start, though outages last longer than 3.5 s
    (issue 26: several messages per outage). The budget is for failures of the turn's own
    (a bug, a statement that keeps failing on a database that answers); while the
    database itself is away the turn waits, keeps its place and its retries, and runs
    again as soon as a probe answers.
    """

    def __init__(self, pool: asyncpg.Pool, outage: Outage, *, first_s: float,
                 max_s: float = PROBE_MAX_S, probe_timeout_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic):
        self.pool = pool
        self.outage = outage
        self.first_s = first_s
        self.max_s = max(first_s, max_s)
        self.probe_timeout_s = probe_timeout_s
        self.clock = clock

    async def away(self) -> bool:
        """True when the database does not answer a trivial query now (bounded: a
        connection attempt to a silent host must not hold the loop for a minute)."""
        try:
            await asyncio.wait_for(self.pool.fetchval("SELECT 1"), self.probe_timeout_s)
        except DB_ERRORS as exc:
            self.outage.down("waiting for the database", exc)
            return True
        return False

    async def until_back(self, pause: Callable[[float], Awaitable[None]], stopped: Callable[[], bool], *,
                         notice_after_s: float, notice: Callable[[], Awaitable[None]]) -> bool:
        """Probe after doubling pauses until the database answers (True) or `stopped()`
        (False); `notice` is awaited once when the wait has lasted `notice_after_s`."""
        started, delay, told = self.clock(), self.first_s, False
        while True:
            await pause(delay)
            if stopped():
                return False
            if not await self.away():
                self.outage.up("cognitive cycle")
                return True
            if not told and self.clock() - started >= notice_after_s:
                told = True
                await notice()
            delay = min(self.max_s, delay * 2)


def waiting_note(messages: int) -> str:
    """What the user is told when a reply has waited a whole cycle deadline for the database."""
    return f"(the database is still unavailable: {messages} message(s) wait for it and will be answered when it is back)"
