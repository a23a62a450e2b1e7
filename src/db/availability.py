"""One line when a background worker finds the database away, one when it is back.

The loop reports an outage through src/loop/outage.py; the background workers (light
ticker, deep scheduler, DMN) fail on every tick while the database restarts. Without
this each tick wrote an ERROR with a traceback (issue 11: one WARNING per outage, no
traceback for an expected outage). A failure that is not the database's stays an
ERROR with its traceback: that is a bug to see.
"""

from __future__ import annotations

import logging

from src.db.pool import DB_ERRORS


class AwayNotice:
    """Per worker: warn once when its database calls start failing, say when they work again."""

    def __init__(self, log: logging.Logger, worker: str):
        self.log = log
        self.worker = worker
        self.away = False

    def failed(self, exc: BaseException) -> None:
        """A tick failed: the database's failure is one WARNING per outage, anything else an ERROR."""
        if not isinstance(exc, DB_ERRORS):
            self.log.error("%s failed; trying again next time", self.worker, exc_info=exc)
            return
        if not self.away:
            self.away = True
            text = str(exc).splitlines()[0] if str(exc) else ""
            self.log.warning("%s paused: database unavailable (%s: %s); retrying", self.worker,
                             type(exc).__name__, text)

    def succeeded(self) -> None:
        if self.away:
            self.away = False
            self.log.warning("%s resumed: the database is back", self.worker)
