"""Promotion reaches the plan's ranges (§4.3, issue 25 item 1), on real PostgreSQL.

A memory that meets §4.3's criteria climbs, one deep pass at a time and never more than
the rate limit a pass, to a center inside its tier's range: goal ~0.6–0.7, identity ~0.8+.
The plan's amounts alone (reinforce 2.0 / 5.0 through diminishing returns) left a
Beta(1, 4) memory at 0.416 after both tiers. Milestones 4 and 6 follow the center reached.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from src.bootstrap.milestones import reached
from src.bootstrap.seeding import seed_boundaries
from src.consolidation.evolution.promotion import predicted_center, run_promotion
from src.consolidation.evolution.promotion_targets import passes_to_reach
from src.consolidation.evolution.settings import EvolutionSettings
from src.consolidation.monitors import DEEP_PASS, run_monitors
from src.memory.jsonl import parse_line
from src.recall.bulk_import import write_batch
from src.recall.store import MemoryStore
from src.weights.apply import WeightChange, apply_weight_changes
from src.weights.safety import Safety
from tests.evolution_helpers import NOW, add_memory, spread, weight
from tests.fakes import HashEmbedder

CFG = EvolutionSettings()
LIMIT = Safety().settings.max_center_change_per_cycle


async def _seeded(pool) -> None:
    """The four safety boundaries every mind is seeded with (immutable, Beta(50, 1)): the
    identity band is never empty in a running mind, and the coherence check after a promotion
    compares against them (with no value at all, the first one would read as a drop)."""
    assert len(await seed_boundaries(MemoryStore(pool, HashEmbedder()))) == 4


async def _center(pool, mid: int) -> float:
    a, b = await weight(pool, mid)
    return a / (a + b)


async def _deep_passes(pool, mid: int, n: int, safety: Safety | None = None) -> list[float]:
    """`n` deep passes an hour apart (promotion, then the pass's monitors); the center after each."""
    safety = safety or Safety()
    centers = []
    for i in range(n):
        await run_promotion(pool, safety, CFG, NOW + timedelta(hours=i), {})
        await run_monitors(pool, safety, DEEP_PASS)
        centers.append(await _center(pool, mid))
    return centers


def _steps(start: float, centers: list[float]) -> list[float]:
    return [c1 - c0 for c0, c1 in zip([start, *centers], centers, strict=False)]


def test_the_plan_amounts_alone_stop_short_of_the_ranges():
    """The probe: reinforce(2.0) or reinforce(5.0) from Beta(1, 4), through diminishing returns."""
    assert predicted_center(1.0, 4.0, CFG.promotion.goal_amount) < 0.35 < 0.6
    assert predicted_center(1.0, 4.0, CFG.promotion.identity_amount) < 0.45 < 0.8
    assert passes_to_reach(0.2, CFG.promotion.goal_target, LIMIT) == 5
    assert passes_to_reach(0.2, CFG.promotion.identity_target, LIMIT) == 7


async def test_a_blank_slate_seen_ten_times_over_a_month_reaches_identity_weight(pool):
    await _seeded(pool)
    mid = await add_memory(pool, "I answer honestly", alpha=1.0, beta=4.0, accesses=spread(10, 31.0))
    centers = await _deep_passes(pool, mid, 9)
    steps = _steps(0.2, centers)
    assert all(step <= LIMIT + 1e-12 for step in steps)                  # the rate limit holds every pass
    assert centers[5] < 0.8 <= centers[6]                                # the 7 passes the climb takes
    assert centers[6] == pytest.approx(CFG.promotion.identity_target)
    assert centers[6:] == [centers[6]] * 3                               # then the climb is over
    assert max(centers) < 0.85                                           # below approval and the ceiling
    p = await pool.fetchrow("SELECT tier, status, remaining, target_center FROM promotions WHERE memory_id = $1",
                            mid)
    assert (p["tier"], p["status"], p["remaining"], p["target_center"]) == ("identity", "applied", 0.0, 0.82)
    milestones = await reached(pool)
    goal, identity = milestones[4][1], milestones[6][1]
    assert goal["memory_id"] == identity["memory_id"] == mid
    assert goal["center_before"] < 0.6 <= goal["center_after"] == pytest.approx(centers[4], abs=1e-4)
    assert identity["center_before"] < 0.8 <= identity["center_after"] == pytest.approx(centers[6], abs=1e-4)
    assert (milestones[4][0], milestones[6][0]) == (NOW + timedelta(hours=4), NOW + timedelta(hours=6))  # the passes' now


async def test_a_blank_slate_seen_five_times_over_two_weeks_reaches_goal_weight(pool):
    await _seeded(pool)
    mid = await add_memory(pool, "I like tea", alpha=1.0, beta=4.0, accesses=spread(5, 14.0))
    centers = await _deep_passes(pool, mid, 6)
    assert all(step <= LIMIT + 1e-12 for step in _steps(0.2, centers))
    assert centers[3] < 0.6 <= centers[4] == pytest.approx(CFG.promotion.goal_target)
    assert 0.6 <= centers[5] == centers[4] <= 0.7
    milestones = await reached(pool)
    assert milestones[4][1]["center_after"] >= 0.6 and 6 not in milestones


async def test_an_imported_memory_at_the_default_prior_climbs_to_goal_weight(pool):
    """What `python -m src.memory import` stores for a line that names no weight."""
    line = json.dumps({"content": "I prefer trains to planes",
                       "access_timestamps": [t.isoformat() for t in spread(5, 15.0)]})
    record = parse_line(line, 1)
    assert (record.memory.alpha, record.memory.beta) == (1.0, 4.0)
    await _seeded(pool)
    assert (await write_batch(pool, HashEmbedder(), [record], {})).inserted == 1
    mid = await pool.fetchval("SELECT id FROM memories WHERE NOT immutable")
    assert await weight(pool, mid) == (1.0, 4.0)
    centers = await _deep_passes(pool, mid, 5)
    assert centers[-1] == pytest.approx(CFG.promotion.goal_target)
    assert await pool.fetchval("SELECT tier FROM promotions WHERE memory_id = $1", mid) == "goal"


async def test_a_memory_already_in_the_range_gets_the_plans_amount(pool):
    """Near its range the plan's reinforce(amount) takes it further than the tier's target."""
    mid = await add_memory(pool, "a settled habit", alpha=7.0, beta=3.0, accesses=spread(5, 14.0))
    await _deep_passes(pool, mid, 2)
    assert await _center(pool, mid) == pytest.approx(predicted_center(7.0, 3.0, CFG.promotion.goal_amount))


async def test_milestones_four_and_six_follow_the_center_not_the_tier(pool):
    mid = await add_memory(pool, "a goal-tier promotion that stays low", alpha=1.0, beta=4.0)
    safety = Safety()
    [out] = await apply_weight_changes(pool, [WeightChange(mid, "reinforce", 2.0, "promotion", "goal promotion",
                                                           {"tier": "goal"})], safety=safety)
    assert out.center_after < 0.6
    [out] = await apply_weight_changes(pool, [WeightChange(mid, "reinforce", 5.0, "promotion", "identity promotion",
                                                           {"tier": "identity"})], safety=safety)
    assert out.center_after < 0.6
    assert await reached(pool) == {}                       # the tier labels alone reach nothing
    [out] = await apply_weight_changes(pool, [WeightChange(mid, "reinforce", 20.0, "promotion", "goal promotion",
                                                           {"tier": "goal"})], safety=safety)
    assert 0.6 <= out.center_after < 0.8
    assert set(await reached(pool)) == {4}
