"""Promotion (plan §4.3) against the real database: sightings, tiers, rate limit, Two-Gate,
coherence rollback, the approval queue."""

from __future__ import annotations

import math

import pytest

import src.skills.consolidation  # noqa: F401  (registers the approval kind 'skill')
from src.consolidation.evolution import approvals
from src.consolidation.evolution.promotion import eligible_tier, predicted_center, run_promotion
from src.consolidation.evolution.promotion_targets import amount_to_center, step_aim
from src.consolidation.evolution.settings import EvolutionSettings, PromotionSettings
from src.weights.safety import Safety, SafetySettings
from tests.evolution_helpers import NOW, add_memory, spread, weight

CFG = EvolutionSettings()


async def _promote(pool, safety=None, settings=CFG, now=NOW) -> dict[str, int]:
    counts: dict[str, int] = {}
    await run_promotion(pool, safety or Safety(), settings, now, counts)
    return counts


async def _log(pool, memory_id):
    return await pool.fetch(
        """SELECT actor, operation, requested_delta, applied_delta, alpha_after, evidence
             FROM consolidation_log WHERE memory_id = $1 ORDER BY id""", memory_id)


@pytest.mark.parametrize(("n", "span", "has_goal", "has_identity", "tier"), [
    (5, 14.0, False, False, "goal"),
    (4, 30.0, False, False, None),          # too few
    (5, 13.9, False, False, None),          # too short
    (10, 30.0, False, False, "identity"),
    (10, 29.0, False, False, "goal"),       # identity span not reached yet
    (10, 29.0, True, False, None),
    (12, 40.0, True, False, "identity"),
    (12, 40.0, True, True, None),
])
def test_eligible_tier(n, span, has_goal, has_identity, tier):
    assert eligible_tier(n, span, has_goal, has_identity, PromotionSettings()) == tier


def test_a_step_aims_inside_the_rate_limit_and_asks_for_what_reaches_its_aim():
    aim = step_aim(0.65, 0.2, max_change=0.1, ceiling=0.95, rate_limited=True)
    assert aim == pytest.approx(0.2 + 0.0999, abs=1e-12)
    amount = amount_to_center(1.0, 4.0, aim)
    assert predicted_center(1.0, 4.0, amount) == pytest.approx(aim, abs=1e-12)   # diminishing returns inverted
    assert step_aim(0.65, 0.6, max_change=0.1, ceiling=0.95, rate_limited=True) == 0.65
    assert step_aim(0.99, 0.2, max_change=0.1, ceiling=0.95, rate_limited=False) == pytest.approx(0.95 - 1e-6)
    assert amount_to_center(2.0, 4.0, 0.3) == 0.0                    # already past its aim


async def test_five_sightings_over_fourteen_days_grant_the_goal_tier_once(pool):
    mid = await add_memory(pool, "likes tea", alpha=2.0, beta=4.0, accesses=spread(5, 14.0))
    counts = await _promote(pool)
    assert counts == {"promotion_applied": 1}
    [row] = await _log(pool, mid)
    assert (row["actor"], row["operation"]) == ("promotion", "reinforce")
    assert row["requested_delta"] == pytest.approx(amount_to_center(2.0, 4.0, 1 / 3 + 0.0999), abs=1e-8)
    assert row["applied_delta"] == pytest.approx(row["requested_delta"] / math.log2(7.0))
    p = await pool.fetchrow("SELECT tier, status, remaining, target_center FROM promotions WHERE memory_id = $1", mid)
    assert (p["tier"], p["status"], p["target_center"]) == ("goal", "applied", 0.65)
    a, b = await weight(pool, mid)
    assert p["remaining"] == pytest.approx(amount_to_center(a, b, 0.65))        # the climb still owed
    while await _promote(pool):                        # the climb, one step a pass
        pass
    a, b = await weight(pool, mid)
    assert a / (a + b) == pytest.approx(0.65)
    assert await pool.fetchval("SELECT count(*) FROM promotions WHERE memory_id = $1", mid) == 1   # granted once


async def test_not_before_the_thresholds(pool):
    few = await add_memory(pool, "four times", alpha=2.0, accesses=spread(4, 20.0))
    short = await add_memory(pool, "too recent", alpha=2.0, accesses=spread(5, 13.0))
    assert await _promote(pool) == {}
    assert await weight(pool, few) == (2.0, 4.0)
    assert await weight(pool, short) == (2.0, 4.0)


async def test_ten_sightings_over_thirty_days_reinforce_five(pool):
    mid = await add_memory(pool, "values honesty", alpha=20.0, beta=4.0, accesses=spread(10, 30.0))
    assert await _promote(pool) == {"promotion_applied": 1}
    [row] = await _log(pool, mid)
    assert row["requested_delta"] == 5.0
    assert row["applied_delta"] == pytest.approx(5.0 / math.log2(25.0))
    tier = await pool.fetchval("SELECT tier FROM promotions WHERE memory_id = $1", mid)
    assert tier == "identity"


async def test_exit_gate_confirmations_and_cluster_retrievals_are_sightings(pool):
    insight = await add_memory(pool, "insight: likes hiking", alpha=2.0, memory_type="reflection")
    src = await add_memory(pool, "went hiking", accesses=spread(3, 16.0))
    await pool.execute("INSERT INTO memory_supersedes (insight_id, source_id) VALUES ($1, $2)", insight, src)
    await pool.execute(
        """INSERT INTO consolidation_log (at, memory_id, operation, actor, reason)
           SELECT t, $1, 'reinforce', 'exit_gate', 'confirming' FROM unnest($2::timestamptz[]) AS t""",
        insight, spread(2, 5.0, end_days_ago=2.0))
    assert await _promote(pool) == {"promotion_applied": 1}
    assert await pool.fetchval("SELECT tier FROM promotions WHERE memory_id = $1", insight) == "goal"


async def test_rate_limit_spreads_the_climb_over_passes(pool):
    mid = await add_memory(pool, "blank slate", alpha=1.0, beta=4.0, accesses=spread(5, 14.0))
    centers = []
    for _ in range(6):
        await _promote(pool)
        a, b = await weight(pool, mid)
        centers.append(a / (a + b))
    steps = [round(c1 - c0, 6) for c0, c1 in zip([0.2, *centers], centers, strict=False)]
    assert steps[:4] == [0.0999] * 4 and steps[5] == 0.0            # 0.0999 a pass, then nothing owed
    assert centers[4] == pytest.approx(0.65)
    assert await pool.fetchval("SELECT remaining FROM promotions WHERE memory_id = $1", mid) == 0.0


async def test_shadow_phase_b_climbs_in_one_pass_and_logs(pool):
    mid = await add_memory(pool, "blank slate", alpha=1.0, beta=4.0, accesses=spread(5, 14.0))
    await _promote(pool, Safety(SafetySettings(phase_b="shadow")))
    [row] = await _log(pool, mid)
    assert row["requested_delta"] == pytest.approx(amount_to_center(1.0, 4.0, 0.65), abs=1e-8)   # to the target
    ev = await pool.fetchrow("SELECT ceiling, enforced FROM safety_events")
    assert (ev["ceiling"], ev["enforced"]) == ("rate_limit", False)


async def test_two_gate_blocks_a_promotion_with_negative_utility(pool):
    mid = await add_memory(pool, "retrieved, never used", alpha=2.0, accesses=spread(5, 14.0), utility=-0.4)
    assert await _promote(pool) == {"promotion_blocked": 1}
    assert await weight(pool, mid) == (2.0, 4.0)
    assert await _log(pool, mid) == []
    ev = await pool.fetchrow("SELECT ceiling, phase, enforced, reason, memory_id FROM safety_events")
    assert (ev["ceiling"], ev["phase"], ev["enforced"], ev["memory_id"]) == ("two_gate", "B", True, mid)
    assert ev["reason"] == "validation margin -0.400 is below the required 0.000"
    p = await pool.fetchrow("SELECT status, reason FROM promotions WHERE memory_id = $1", mid)
    assert p["status"] == "blocked"
    assert p["reason"] == "blocked by two_gate: validation margin -0.400 is below the required 0.000"


async def test_two_gate_capacity_blocks_a_full_tier(pool):
    settings = EvolutionSettings(promotion=PromotionSettings(goal_capacity=2))
    for i in range(2):
        await add_memory(pool, f"already a goal {i}", alpha=7.0, beta=3.0)
    mid = await add_memory(pool, "joins the goal tier", alpha=5.5, beta=4.0, accesses=spread(5, 14.0))
    assert await _promote(pool, settings=settings) == {"promotion_blocked": 1}
    reason = await pool.fetchval("SELECT reason FROM safety_events WHERE memory_id = $1", mid)
    assert reason == "capacity used 1.500 exceeds the cap 0.900"


async def test_coherence_drop_rolls_the_promotion_back(pool):
    await add_memory(pool, "settled value", alpha=10.0, beta=2.0)
    mid = await add_memory(pool, "contested belief", alpha=8.5, beta=6.0, accesses=spread(5, 14.0))
    assert await _promote(pool) == {"promotion_rolled_back": 1}
    assert await weight(pool, mid) == (8.5, 6.0)
    assert await _log(pool, mid) == []                 # the audit row went with the rollback
    p = await pool.fetchrow("SELECT status, reason FROM promotions WHERE memory_id = $1", mid)
    assert p["status"] == "rolled_back"
    assert p["reason"].startswith("rolled back: coherence fell from 0.863 to 0.685")
    ev = await pool.fetchrow("SELECT ceiling, phase, enforced FROM safety_events")
    assert (ev["ceiling"], ev["phase"], ev["enforced"]) == ("cba_coherence", "C", False)


async def test_high_center_waits_for_approval_then_applies(pool):
    mid = await add_memory(pool, "core identity", alpha=30.0, beta=4.0, accesses=spread(10, 30.0))
    assert await _promote(pool) == {"promotion_pending_approval": 1}
    assert await weight(pool, mid) == (30.0, 4.0)
    [pending] = await pool.fetch("SELECT id, kind, status, payload, reason FROM approvals")
    assert (pending["kind"], pending["status"]) == ("promotion", "pending")
    assert pending["reason"] == (f"identity promotion would lift memory {mid} to center 0.886 (> 0.85) "
                                 "at trust level 0")
    assert await _promote(pool) == {}                  # not queued twice
    ctx = approvals.ApprovalContext(pool, Safety(), CFG, NOW)
    listing = await approvals.pending_text(pool)
    assert listing.splitlines()[0] == "1 approval(s) pending (/approve ID or /reject ID):"
    answer = await approvals.decide(ctx, str(pending["id"]), approve=True)
    assert answer == (f"approval #{pending['id']} (promotion) approved: identity promotion of memory {mid}: "
                      "applied, center now 0.886")
    [row] = await _log(pool, mid)
    assert (row["actor"], row["requested_delta"]) == ("promotion", 5.0)
    again = await approvals.decide(ctx, str(pending["id"]), approve=True)
    assert again.startswith(f"approval #{pending['id']} was already approved")
    assert await pool.fetchval("SELECT status FROM promotions WHERE memory_id = $1", mid) == "applied"


async def test_trusted_mind_promotes_without_approval(pool):
    mid = await add_memory(pool, "core identity", alpha=30.0, beta=4.0, accesses=spread(10, 30.0))
    settings = EvolutionSettings(promotion=PromotionSettings(trust_level=3))
    assert await _promote(pool, settings=settings) == {"promotion_applied": 1}
    assert (await weight(pool, mid))[0] > 30.0


async def test_rejecting_an_approval_closes_the_promotion(pool):
    mid = await add_memory(pool, "core identity", alpha=30.0, beta=4.0, accesses=spread(10, 30.0))
    await _promote(pool)
    aid = await pool.fetchval("SELECT id FROM approvals")
    ctx = approvals.ApprovalContext(pool, Safety(), CFG, NOW)
    assert await approvals.decide(ctx, f"#{aid}", approve=False) == f"approval #{aid} (promotion) rejected"
    assert await pool.fetchval("SELECT status FROM promotions WHERE memory_id = $1", mid) == "rejected"
    assert await _promote(pool) == {}
    assert await weight(pool, mid) == (30.0, 4.0)


async def test_approval_errors_name_the_problem(pool):
    ctx = approvals.ApprovalContext(pool, Safety(), CFG, NOW)
    assert await approvals.decide(ctx, "abc", approve=True) == (
        "usage: /approve ID — the number shown by /pending (got 'abc')")
    assert await approvals.decide(ctx, "42", approve=True) == "no approval #42; /pending lists the open ones"
    assert await approvals.pending_text(pool) == "no approvals pending"
    aid = await pool.fetchval(
        "INSERT INTO approvals (kind, reason) VALUES ('mystery', 'x\x1b[31m') RETURNING id")
    assert "\\x1b" in await approvals.pending_text(pool)
    assert await approvals.decide(ctx, str(aid), approve=True) == (
        f"approval #{aid} has kind 'mystery', which nothing can apply (known kinds: promotion, skill); it stays pending")
