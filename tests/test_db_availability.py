"""Background workers through a database outage (issue 11, Deliver 4): one WARNING when
the database goes away and one when it is back, no traceback; a bug still shows one."""

from __future__ import annotations

import asyncio
import logging

import asyncpg

from src.consolidation.light.ticker import LightTicker
from src.consolidation.settings import ConsolidationSettings
from src.db import availability
from src.db.availability import AwayNotice, tick_until_stopped
from src.logging_setup import OneLineErrors
from src.weights.safety import Safety
from tests.fakes import HashEmbedder

AWAY = asyncpg.exceptions.CannotConnectNowError("the database system is starting up")


def test_an_outage_is_one_warning_each_way_and_a_bug_is_an_error_with_its_traceback(caplog):
    log = logging.getLogger("test.worker")
    notice = AwayNotice(log, "light consolidation")
    with caplog.at_level(logging.INFO, logger="test.worker"):
        for _ in range(3):
            notice.failed(AWAY)
        notice.succeeded()
        notice.succeeded()
        notice.failed(ValueError("a bug"))
    assert [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records] == [
        ("WARNING", "light consolidation paused: database unavailable (the database server is starting up or "
                    "shutting down [CannotConnectNowError: the database system is starting up]); retrying", False),
        ("WARNING", "light consolidation resumed: the database is back", False),
        ("ERROR", "light consolidation failed; trying again next time", True),
    ]


async def test_the_light_ticker_says_an_outage_once(pool, caplog, monkeypatch):
    ticker = LightTicker(pool, embedder=HashEmbedder(), llm=None, safety=Safety(),
                         settings=ConsolidationSettings())
    results = [AWAY, AWAY, AWAY, None]

    async def tick(now=None):
        outcome = results.pop(0)
        if outcome is not None:
            raise outcome
        return {}

    monkeypatch.setattr(ticker, "tick", tick)
    with caplog.at_level(logging.WARNING, logger="src.consolidation.light.ticker"):
        assert await ticker.run(stop=asyncio.Event(), max_ticks=4, burst=True) == 4
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "light consolidation paused", "light consolidation resumed"]
    assert all(r.exc_info is None for r in caplog.records)


async def test_the_tick_loop_backs_off_while_ticks_fail_and_resets_when_one_works(monkeypatch):
    waits: list[float] = []

    async def pause(stop, seconds):
        waits.append(seconds)

    monkeypatch.setattr(availability, "_pause", pause)
    outcomes = [AWAY, AWAY, AWAY, AWAY, None, AWAY]

    async def tick():
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome

    notice = AwayNotice(logging.getLogger("test.worker"), "worker")
    assert await tick_until_stopped(tick, every_s=10.0, notice=notice, max_ticks=6) == 6
    assert waits == [10.0, 20.0, 40.0, 80.0, 80.0, 10.0]       # doubling, capped at 8x, reset by a success
    assert notice.away


async def test_the_tick_loop_ends_a_wait_when_stopped_and_can_tick_first():
    notice = AwayNotice(logging.getLogger("test.worker"), "worker")
    stop = asyncio.Event()
    ticks: list[int] = []

    async def tick():
        ticks.append(1)
        stop.set()

    assert await asyncio.wait_for(tick_until_stopped(tick, every_s=60.0, notice=notice, stop=stop,
                                                     wait_first=False), 5) == 1
    stop.clear()
    waiting = asyncio.create_task(tick_until_stopped(tick, every_s=60.0, notice=notice, stop=stop))
    await asyncio.sleep(0.01)
    stop.set()
    assert await asyncio.wait_for(waiting, 5) == 0 and ticks == [1]


def test_asyncpg_reconnect_retries_are_said_once_per_quiet_period():
    now = [100.0]
    quiet = OneLineErrors(quiet_s=300.0, clock=lambda: now[0])

    def record(msg: str) -> logging.LogRecord:
        try:
            raise ConnectionRefusedError(111, "Connect call failed")
        except ConnectionRefusedError as exc:
            return logging.LogRecord("asyncpg.pool", logging.WARNING, "pool.py", 1, msg, None,
                                     (type(exc), exc, exc.__traceback__))

    first = record("Failed to restore the pool connection floor; retrying")
    assert quiet.filter(first) and first.exc_info is None          # said, on one line
    assert first.getMessage() == ("Failed to restore the pool connection floor; retrying "
                                  "(ConnectionRefusedError: [Errno 111] Connect call failed)")
    now[0] += 60
    assert not quiet.filter(record("Failed to restore the pool connection floor; retrying"))
    assert quiet.filter(record("some other pool warning"))            # only the retry is quietened
    now[0] += 300
    assert quiet.filter(record("Failed to restore the pool connection floor; retrying"))


def test_a_server_that_cannot_be_reached_is_said_in_words():
    # a stopped embedded server: its Unix socket file is gone
    from src.loop.outage import describe
    gone = FileNotFoundError(2, "No such file or directory")
    assert describe(gone) == ("the database server is not running (its socket is gone) "
                              "[FileNotFoundError: [Errno 2] No such file or directory]")
    assert describe(ConnectionRefusedError(111, "Connection refused")).startswith(
        "the database server refused the connection")
    assert describe(ValueError("a bug")) == "ValueError: a bug"     # anything else as it was
