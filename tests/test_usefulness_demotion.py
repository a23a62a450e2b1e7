"""Demotion goes through the Two-Gate guardrail (issue 25 item 3, plan §5.3: "Two-Gate
guardrail on every promotion/demotion"): margin = −utility, capacity = the share of the
tier's capacity one pass drains."""

from __future__ import annotations

import json
from datetime import timedelta

from src.consolidation.evolution.forgetting import run_demotion
from src.consolidation.evolution.settings import EvolutionSettings, PromotionSettings
from src.weights.safety import Safety
from src.weights.settings import SafetySettings
from tests.evolution_helpers import NOW, add_memory, days_ago, weight

CFG = EvolutionSettings()


async def _events(pool) -> list:
    return await pool.fetch("SELECT ceiling, phase, memory_id, enforced, reason, action FROM safety_events ORDER BY id")


async def test_a_useful_idle_memory_is_not_demoted_a_useless_one_is(pool):
    useful = await add_memory(pool, "a goal the answers draw on", alpha=6.0, beta=3.0, accesses=[days_ago(40)],
                              utility=0.4)
    useless = await add_memory(pool, "a goal nothing uses", alpha=6.0, beta=3.0, accesses=[days_ago(40)],
                               utility=-0.3)
    counts: dict[str, int] = {}
    assert await run_demotion(pool, Safety(), CFG, NOW, counts) == [useless]
    assert counts == {"demoted": 1, "demotion_refused": 1}
    assert await weight(pool, useful) == (6.0, 3.0) and await weight(pool, useless) == (6.0, 3.5)
    [event] = await _events(pool)
    assert (event["ceiling"], event["phase"], event["memory_id"], event["enforced"]) == ("two_gate", "B", useful, True)
    assert event["reason"] == "validation margin -0.400 is below the required 0.000"
    action = json.loads(event["action"])
    assert (action["actor"], action["at"], action["utility"], action["tier"]) == (
        "demotion", NOW.isoformat(), 0.4, "goal")
    log = await pool.fetchrow("SELECT actor, evidence FROM consolidation_log WHERE memory_id = $1", useless)
    assert log["actor"] == "demotion" and json.loads(log["evidence"])["two_gate"].startswith("validation margin 0.300")
    # a refusal waits a week like a demotion: no second event the next day; tried again after 8 days
    assert await run_demotion(pool, Safety(), CFG, NOW + timedelta(days=1), {}) == []
    assert len(await _events(pool)) == 1
    assert await run_demotion(pool, Safety(), CFG, NOW + timedelta(days=8), {}) == [useless]
    assert [e["memory_id"] for e in await _events(pool)] == [useful, useful]


async def test_one_pass_never_drains_a_tier(pool):
    cfg = EvolutionSettings(promotion=PromotionSettings(goal_capacity=4))      # 0.9 of 4: three a pass
    ids = [await add_memory(pool, f"idle goal {i}", alpha=6.0, beta=3.0, accesses=[days_ago(40)], utility=-0.1 * i)
           for i in range(5)]
    counts: dict[str, int] = {}
    demoted = await run_demotion(pool, Safety(), cfg, NOW, counts)
    assert demoted == [ids[4], ids[3], ids[2]]           # least useful first: utilities -0.4, -0.3, -0.2
    events = await _events(pool)
    assert [(e["memory_id"], e["reason"]) for e in events] == [
        (ids[1], "capacity used 1.000 exceeds the cap 0.900"), (ids[0], "capacity used 1.000 exceeds the cap 0.900")]


async def test_in_shadow_mode_the_refusal_is_logged_and_the_demotion_applies(pool):
    useful = await add_memory(pool, "useful", alpha=6.0, beta=3.0, accesses=[days_ago(40)], utility=0.4)
    shadow = Safety(SafetySettings(phase_b="shadow"))
    assert await run_demotion(pool, shadow, CFG, NOW, {}) == [useful]
    [event] = await _events(pool)
    assert (event["ceiling"], event["enforced"]) == ("two_gate", False)
    assert await weight(pool, useful) == (6.0, 3.5)
