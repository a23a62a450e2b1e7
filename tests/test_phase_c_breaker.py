"""Phase C's circuit breaker acts (plan §3.9, issue 25 item 2), on real PostgreSQL.

Real patterns feed it: the weight choke point's (actor, memory) for every reinforcement,
the promotion path (its evidence the sightings) and the DMN's loop (`check_pattern`).
Each test drives one to trip in both modes: enforced, the pattern's reinforcements without
new evidence are refused; shadow, they apply and the same events say what would have been.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from src.consolidation.evolution.promotion import run_promotion
from src.consolidation.evolution.settings import EvolutionSettings
from src.consolidation.monitors import DEEP_PASS, run_monitors
from src.weights.apply import WeightChange, apply_weight_changes
from src.weights.safety import Safety, SafetyEvent, insert_safety_events
from src.weights.safety_rules import PatternBreaker
from src.weights.settings import SafetySettings
from tests.evolution_helpers import NOW, add_memory, spread, weight
from tests.test_promotion_ranges import _seeded

MODES = ["enforced", "shadow"]


def _safety(mode: str) -> Safety:
    return Safety(SafetySettings(phase_c=mode))


async def _events(pool, ceiling: str = "circuit_breaker") -> list[tuple[bool, str, str]]:
    rows = await pool.fetch("SELECT enforced, reason, action FROM safety_events WHERE ceiling = $1 ORDER BY id",
                            ceiling)
    return [(r["enforced"], r["reason"], json.loads(r["action"])["effect"]) for r in rows]


def _recall(mid: int, query: str) -> WeightChange:
    return WeightChange(mid, "reinforce", 0.1, "retrieval", "retrieved", {"query": query})


@pytest.mark.parametrize("mode", MODES)
async def test_retrieval_reinforcing_one_memory_on_one_query_trips(pool, mode):
    mid = await add_memory(pool, "the loop's favourite", alpha=1.0, beta=4.0)
    safety = _safety(mode)
    for _ in range(5):                                   # five light cycles, the same query each time
        [out] = await apply_weight_changes(pool, [_recall(mid, "what do I like?")], safety=safety)
        assert out.blocked_by is None
        await run_monitors(pool, safety, "light_consolidation")
    tripped = await _events(pool)
    assert tripped == [(mode == "enforced",
                        f"pattern 'retrieval/#{mid}' reinforced 5 cycles in a row with no new evidence (limit 5); "
                        "pausing its reinforcement",
                        "its reinforcements without new evidence are refused" if mode == "enforced"
                        else "would refuse its reinforcements without new evidence")]
    before = await weight(pool, mid)
    [again] = await apply_weight_changes(pool, [_recall(mid, "what do I like?")], safety=safety)
    effect = (await _events(pool))[-1][2]
    if mode == "enforced":
        assert again.blocked_by == "circuit_breaker" and await weight(pool, mid) == before
        assert effect == "reinforcement refused"
    else:
        assert again.blocked_by is None and (await weight(pool, mid))[0] > before[0]
        assert effect == "would refuse this reinforcement"
    # new evidence (another question) is not paused, in either mode
    [fresh] = await apply_weight_changes(pool, [_recall(mid, "what do I love?")], safety=safety)
    assert fresh.blocked_by is None


async def test_a_cycle_spent_on_other_memories_breaks_the_row(pool):
    mid = await add_memory(pool, "favourite", alpha=1.0, beta=4.0)
    other = await add_memory(pool, "another", alpha=1.0, beta=4.0)
    safety = _safety("enforced")
    for i in range(8):
        target = other if i == 3 else mid                # the fourth cycle recalls something else
        await apply_weight_changes(pool, [_recall(target, "q")], safety=safety)
        await run_monitors(pool, safety, "light_consolidation")
    assert await _events(pool) == []                     # mid: 3 cycles, then 4: never 5 in a row
    await run_monitors(pool, safety, "light_consolidation")     # an idle cycle is skipped, not a break
    await apply_weight_changes(pool, [_recall(mid, "q")], safety=safety)
    await run_monitors(pool, safety, "light_consolidation")
    assert len(await _events(pool)) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_a_promotion_climbing_without_new_sightings_trips(pool, mode):
    """The identity climb from Beta(1, 4) takes 7 passes; with no new sighting for 5 of them
    the promotion path trips: enforced, the climb waits for a new sighting."""
    await _seeded(pool)
    mid = await add_memory(pool, "I answer honestly", alpha=1.0, beta=4.0, accesses=spread(10, 31.0))
    safety = _safety(mode)

    async def deep_pass(hour: int) -> dict[str, int]:
        counts: dict[str, int] = {}
        await run_promotion(pool, safety, EvolutionSettings(), NOW + timedelta(hours=hour), counts)
        for _ in range(3):                               # light ticks between passes do not count
            await run_monitors(pool, safety, "light_consolidation")
        await run_monitors(pool, safety, DEEP_PASS)
        return counts

    for hour in range(5):
        assert await deep_pass(hour) == {"promotion_applied": 1}
    assert [e[0] for e in await _events(pool)] == [mode == "enforced"]        # tripped after the fifth
    a, b = await weight(pool, mid)
    if mode == "shadow":
        assert await deep_pass(5) == {"promotion_applied": 1}
        assert await deep_pass(6) == {"promotion_applied": 1}
        a, b = await weight(pool, mid)
        assert a / (a + b) == pytest.approx(0.82)
        return
    assert await deep_pass(5) == {"promotion_blocked": 1}
    assert await weight(pool, mid) == (a, b)
    p = await pool.fetchrow("SELECT status, reason FROM promotions WHERE memory_id = $1", mid)
    assert p["status"] == "applied" and p["reason"].startswith("climb stalled: blocked by circuit_breaker")
    # the memory comes back: a new sighting is new evidence, and the climb goes on
    await pool.execute("UPDATE memories SET access_timestamps = access_timestamps || $2::timestamptz WHERE id = $1",
                       mid, NOW + timedelta(hours=5, minutes=30))
    assert await deep_pass(6) == {"promotion_applied": 1}
    assert await deep_pass(7) == {"promotion_applied": 1}
    a, b = await weight(pool, mid)
    assert a / (a + b) == pytest.approx(0.82)


@pytest.mark.parametrize("mode", MODES)
async def test_a_dmn_loop_surfacing_one_memory_trips(pool, mode):
    """What the DMN calls per surfaced memory: the pattern dmn/#id, its evidence what
    surfaced it; a paused memory is left out of the next draw (enforced)."""
    mid = await add_memory(pool, "an old worry", alpha=1.0, beta=4.0)
    safety = _safety(mode)
    for _ in range(5):
        events: list[SafetyEvent] = []
        assert safety.check_pattern("dmn", mid, frozenset({"neglect bias"}), events=events) == (True, "")
        await run_monitors(pool, safety, "light_consolidation")
    events = []
    allowed, reason = safety.check_pattern("dmn", mid, frozenset({"neglect bias"}), events=events)
    await insert_safety_events(pool, events)
    assert allowed is (mode == "shadow")
    assert reason == ("" if mode == "shadow" else
                      f"pattern dmn/#{mid} is tripped (reinforced 5+ cycles in a row with no new evidence) "
                      "and this reinforcement brings none")
    assert [e[0] for e in await _events(pool)] == [mode == "enforced"] * 2     # the trip, the pause
    assert safety.check_pattern("dmn", mid, frozenset({"goal link"}))[0] is True


def test_a_breaker_remembers_a_bounded_amount_of_evidence():
    breaker = PatternBreaker(max_cycles=2, max_evidence=3)
    for e in "abcd":                                     # new evidence each cycle: never trips
        assert breaker.observe("p", [e]).passed
    assert breaker.knows(["b", "c", "d"]) and not breaker.knows(["a"])     # "a" was forgotten
    assert not breaker.observe("p", ["d"]).passed                       # known: the second cycle trips
    assert breaker.observe("p", ["a"]).passed                           # forgotten counts as new again
