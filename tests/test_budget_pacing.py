"""The DMN's pacing (issue 24): while nothing new arrives its ticks come ever further apart, and
anything new brings it back to the full rate. Pure rules with an injected `now`, then the news
query against real PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from src.dmn.pacing import Pacing
from src.dmn.settings import DmnSettings

T0 = datetime(2026, 11, 25, 1, 0, tzinfo=UTC)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_the_interval_doubles_per_quiet_tick_up_to_its_cap_and_news_resets_it():
    pacing = Pacing.of(DmnSettings(interval_s=30, rest_factor=2.0, rest_max_s=240))
    ticks, now = [], 0.0
    while now <= 1200:                     # the task wakes every interval_s
        if pacing.due(_at(now)):
            ticks.append(now)
            pacing.ticked(_at(now))
        now += 30
    assert ticks == [0, 30, 90, 210, 450, 690, 930, 1170]      # waits 30, 60, 120, then 240 (the cap)
    assert pacing.interval_s == 240
    pacing.news()
    assert pacing.due(_at(1200)) and pacing.interval_s == 30
    pacing.ticked(_at(1200))
    assert not pacing.due(_at(1229)) and pacing.due(_at(1230))


@pytest.mark.parametrize(("factor", "cap", "waits"), [
    (1.0, 960, [30, 30, 30]),              # factor 1: the old fixed rate
    (3.0, 100, [30, 90, 100]),
])
def test_the_pacing_follows_its_settings(factor, cap, waits):
    pacing = Pacing.of(DmnSettings(interval_s=30, rest_factor=factor, rest_max_s=cap))
    at, seen = _at(0), []
    for _ in waits:
        pacing.ticked(at)
        seen.append((pacing.next_at - at).total_seconds())
        at = pacing.next_at
    assert seen == waits


async def _memory(pool, source: str) -> int:
    return await pool.fetchval("INSERT INTO memories (content, source_tag) VALUES ($1, $2) RETURNING id",
                               f"something from {source}", source)


async def test_only_the_user_or_a_memory_from_outside_is_news(pool):
    pacing = Pacing.of(DmnSettings())
    assert await pacing.look(pool, _at(0)) is True             # the first look: start at the full rate
    assert await pacing.look(pool, _at(30)) is False
    for own in ("internal_dmn", "internal_self", "internal_gut", "internal_consolidation"):
        await _memory(pool, own)
        assert await pacing.look(pool, _at(60)) is False, own   # the mind's own products wake nothing
    await _memory(pool, "external_user")
    assert await pacing.look(pool, _at(90)) is True
    assert await pacing.look(pool, _at(120)) is False          # seen: not news twice
    await pool.execute("INSERT INTO thought_log (at, cycle, source_tag) VALUES ($1, 1, 'internal_dmn')", _at(130))
    assert await pacing.look(pool, _at(150)) is False
    await pool.execute("INSERT INTO thought_log (at, cycle, source_tag) VALUES ($1, 2, 'external_user')", _at(160))
    assert await pacing.look(pool, _at(180)) is True


async def test_the_dmn_task_rests_while_nothing_arrives_and_wakes_for_the_user(pool):
    pacing = Pacing.of(DmnSettings(interval_s=30, rest_factor=2.0, rest_max_s=960))
    ran: list[float] = []

    async def tick(now):
        ran.append((now - T0).total_seconds())
        return "ticked"

    results = [await pacing.step(pool, _at(s), tick) for s in range(0, 901, 30)]
    assert ran == [0, 30, 90, 210, 450]
    assert results.count(None) == pacing.rests == 31 - len(ran)
    assert pacing.describe(_at(900)) == "DMN: next tick in 30 s; resting: nothing new since it last ticked"
    await pool.execute("INSERT INTO thought_log (at, cycle, source_tag) VALUES ($1, 1, 'external_user')",
                       _at(905))
    assert await pacing.step(pool, _at(930), tick) == "ticked"        # back at once, and at the full rate
    assert pacing.describe(_at(930)) == "DMN: next tick in 30 s"
    assert await pacing.step(pool, _at(960), tick) == "ticked"
    assert ran[-2:] == [930, 960]
