"""One WARNING when the database goes away and one when it is back — never a traceback
per failed statement (issue 11: an outage must degrade, not flood stderr)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from src.db.pool import DB_ERRORS

log = logging.getLogger(__name__)

__all__ = ["DB_ERRORS", "Outage", "describe"]


def describe(exc: BaseException) -> str:
    """The first line of an error, with its type: enough to tell what was wrong."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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
            log.warning("database unavailable (%s in %s); holding input and retrying with backoff",
                        describe(exc), where)

    def up(self, where: str) -> None:
        """A database call succeeded in `where`; ends an outage (logged once)."""
        if self.since is None:
            return
        seconds = self._clock() - self.since
        log.warning("database available again (%s) after %.1f s; %d call(s) failed meanwhile",
                    where, seconds, self.failures)
        self.since = None
        self.failures = 0
