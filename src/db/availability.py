"""One line when a background worker finds the database away, one when it is back.

The loop reports an outage through src/loop/outage.py; the background workers (light
ticker, deep scheduler, DMN) fail on every tick while the database restarts. Without
this each tick wrote an ERROR with a traceback (issue 11: one WARNING per outage, no
traceback for an expected outage). A failure that is not the database's stays an
ERROR with its traceback: that is a bug to see.

`tick_until_stopped` is the one loop those three workers run: wait, tick, say how the
tick went, back off while ticks keep failing (issue 23: it was written three times).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import asyncpg

from src.db.pool import DB_ERRORS

#: While ticks keep failing the wait doubles, up to this many times the worker's interval:
#: a restarting database is not asked every few seconds, and comes back into use within a
#: few intervals of its return.
BACKOFF_MAX_FACTOR = 8.0


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
            self.log.warning("%s paused: database unavailable (%s); retrying", self.worker, describe(exc))

    def succeeded(self) -> None:
        if self.away:
            self.away = False
            self.log.warning("%s resumed: the database is back", self.worker)


async def tick_until_stopped(tick: Callable[[], Awaitable[object]], *, every_s: float, notice: AwayNotice,
                             stop: asyncio.Event | None = None, wait_first: bool = True,
                             max_ticks: int | None = None, burst: bool = False,
                             backoff_max_factor: float = BACKOFF_MAX_FACTOR) -> int:
    """Run `tick` every `every_s` until `stop` is set (or `max_ticks` ran); how many ran.

    A background worker outlives a bad tick: the failure goes to `notice` (one WARNING per
    database outage, an ERROR with traceback for anything else) and the next wait doubles,
    up to `backoff_max_factor` × `every_s`; a tick that works resets it. `wait_first`
    waits one interval before the first tick (a mind that just woke up attends to its
    input first); `burst` never waits (tests). Setting `stop` ends a wait at once.
    """
    done, factor = 0, 1.0
    while not _stopped(stop) and (max_ticks is None or done < max_ticks):
        if not burst and (done or wait_first):
            await _pause(stop, every_s * factor)
            if _stopped(stop):
                break
        try:
            await tick()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the worker outlives a bad tick (database restarting, a bug)
            notice.failed(exc)
            factor = min(factor * 2, backoff_max_factor)
        else:
            notice.succeeded()
            factor = 1.0
        done += 1
    return done


def _stopped(stop: asyncio.Event | None) -> bool:
    return stop is not None and stop.is_set()


async def _pause(stop: asyncio.Event | None, seconds: float) -> None:
    """Sleep `seconds`, or less when `stop` is set meanwhile."""
    if stop is None:
        await asyncio.sleep(seconds)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


#: Failures to reach the server in plain words, most specific first (asyncpg connects over
#: the server's Unix socket, so a stopped server is a missing file, not a refusal: the
#: guardian used to read only "FileNotFoundError: [Errno 2] No such file or directory").
_UNREACHABLE: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], str], ...] = (
    (FileNotFoundError, "the database server is not running (its socket is gone)"),
    (ConnectionRefusedError, "the database server refused the connection (not running or not listening)"),
    (asyncpg.CannotConnectNowError, "the database server is starting up or shutting down"),
    ((ConnectionResetError, asyncpg.ConnectionDoesNotExistError), "the connection to the database was lost"),
)


def describe(exc: BaseException) -> str:
    """The first line of an error, with its type: enough to tell what was wrong. A failure
    to reach the database server says so in words first (`_UNREACHABLE`), the raw error after
    it in brackets: "FileNotFoundError: [Errno 2] No such file or directory" was all a
    stopped server showed (its socket file is gone)."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    raw = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    plain = next((words for kind, words in _UNREACHABLE if isinstance(exc, kind)), None)
    return f"{plain} [{raw}]" if plain else raw
