"""Protection from forgetting (issue 17): decay, demotion and near-miss suppression skip a
protected memory at the weight choke point, which logs the skip; evidence still applies;
immutable memories stay as they are. Real PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from src.recall.mutation import apply_near_misses, mutate_after_retrieval
from src.weights.apply import PROTECTED_SKIP, WeightChange, apply_weight_changes
from src.weights.protection import count_protected, protect_command
from src.weights.safety import Safety

AT = datetime(2026, 11, 23, 6, 0, tzinfo=UTC)


async def _memory(pool, *, immutable=False, protected=False, alpha=3.0, beta=4.0):
    return await pool.fetchval(
        """INSERT INTO memories (content, depth_weight_alpha, depth_weight_beta, immutable, protected)
           VALUES ('the guardian was born in Lisbon', $1, $2, $3, $4) RETURNING id""",
        alpha, beta, immutable, protected)


async def _weights(pool, mid):
    row = await pool.fetchrow("SELECT depth_weight_alpha, depth_weight_beta FROM memories WHERE id = $1", mid)
    return row["depth_weight_alpha"], row["depth_weight_beta"]


async def test_near_miss_suppression_skips_a_protected_memory_and_logs_why(pool):
    kept = await _memory(pool, protected=True)
    plain = await _memory(pool)
    retrieved = await _memory(pool)
    await mutate_after_retrieval(pool, [retrieved], [kept, plain], safety=Safety(), at=AT, query="lisbon")
    assert await apply_near_misses(pool, Safety(), limit=10) == 1    # queued, applied by the light ticker
    assert await _weights(pool, kept) == (3.0, 4.0)
    assert await _weights(pool, plain) == (3.0, 4.05)
    rows = await pool.fetch("""SELECT memory_id, operation, actor, reason, requested_delta, applied_delta,
                                      alpha_before, beta_before, alpha_after, beta_after, evidence
                                 FROM consolidation_log WHERE memory_id = ANY($1) ORDER BY memory_id""",
                            [kept, plain])
    skip, applied = rows
    assert (skip["memory_id"], skip["operation"], skip["actor"], skip["requested_delta"], skip["applied_delta"],
            skip["alpha_before"], skip["beta_before"], skip["alpha_after"], skip["beta_after"]) == (
        kept, PROTECTED_SKIP, "retrieval", 0.05, 0.0, 3.0, 4.0, 3.0, 4.0)
    assert skip["reason"] == "protected from forgetting: near_miss (contradict 0.05) skipped; near miss"
    assert json.loads(skip["evidence"]) == {"query": "lisbon", "skipped": "contradict", "forgetting": "near_miss"}
    assert (applied["operation"], applied["applied_delta"]) == ("contradict", 0.05)


@pytest.mark.parametrize("forgetting", ["decay", "demotion"])
async def test_decay_and_demotion_skip_a_protected_memory(pool, forgetting):
    kept = await _memory(pool, protected=True)
    plain = await _memory(pool)
    changes = [WeightChange(mid, "contradict", 1.0, "consolidation", f"{forgetting} tick", forgetting=forgetting)
               for mid in (kept, plain)]
    out = await apply_weight_changes(pool, changes, safety=Safety())
    assert [(o.blocked_by, o.applied) for o in out] == [("protected", 0.0), (None, 1.0)]
    assert out[0].reason == f"protected from forgetting: {forgetting} skipped"
    assert await _weights(pool, kept) == (3.0, 4.0)
    assert await _weights(pool, plain) == (3.0, 5.0)
    ops = await pool.fetch("SELECT memory_id, operation FROM consolidation_log ORDER BY memory_id")
    assert [(r["memory_id"], r["operation"]) for r in ops] == [(kept, PROTECTED_SKIP), (plain, "contradict")]


async def test_evidence_still_moves_a_protected_memory(pool):
    kept = await _memory(pool, protected=True)
    out = await apply_weight_changes(pool, [
        WeightChange(kept, "contradict", 0.5, "exit_gate", "contradicted by a new item"),
        WeightChange(kept, "reinforce", 1.0, "retrieval", "retrieved")], safety=Safety())
    assert [o.blocked_by for o in out] == [None, None]
    alpha, beta = await _weights(pool, kept)
    assert beta == 4.5 and alpha > 3.0


async def test_immutable_stays_as_it_is(pool):
    fixed = await _memory(pool, immutable=True, alpha=50.0, beta=1.0)
    out = await apply_weight_changes(pool, [WeightChange(fixed, "contradict", 1.0, "consolidation", "decay",
                                                         forgetting="decay")], safety=Safety())
    assert (out[0].blocked_by, out[0].applied) == ("immutable", 0.0)
    assert await pool.fetchval("SELECT count(*) FROM consolidation_log") == 0
    assert await protect_command(pool, str(fixed), True) == (
        f"memory #{fixed} is immutable: its weight never changes; nothing to protect")
    assert await pool.fetchval("SELECT protected FROM memories WHERE id = $1", fixed) is False


def test_forgetting_kind_is_checked():
    with pytest.raises(ValueError, match="forgetting must be one of decay, demotion, near_miss, got 'sleep'"):
        WeightChange(1, "contradict", 1.0, "x", "y", forgetting="sleep")


async def test_protect_and_unprotect_commands(pool):
    mid = await _memory(pool)
    assert await protect_command(pool, f"#{mid}", True) == (
        f"memory #{mid} is protected: decay, demotion and near-miss suppression skip it (/unprotect to undo)")
    assert await protect_command(pool, str(mid), True) == f"memory #{mid} was already protected"
    assert await count_protected(pool) == 1
    assert await protect_command(pool, str(mid), False) == (
        f"memory #{mid} is no longer protected: it can fade like any other")
    assert await count_protected(pool) == 0
    assert await protect_command(pool, "999999", True) == "no memory #999999; /memory <words> shows ids"
    assert await protect_command(pool, "twelve", False) == (
        "usage: /unprotect ID  (a memory id, as /memory shows it: #12)")


async def test_consolidation_decay_and_demotion_skip_a_protected_memory(pool):
    from src.consolidation.evolution.forgetting import run_decay, run_demotion
    from src.consolidation.evolution.settings import EvolutionSettings
    from tests.evolution_helpers import NOW, add_memory, days_ago, weight

    cfg = EvolutionSettings()
    kept = await add_memory(pool, "the day we met", accesses=[days_ago(120)])
    plain = await add_memory(pool, "an old receipt", accesses=[days_ago(120)])
    goal = await add_memory(pool, "a goal nobody revisits", alpha=6.0, beta=3.0, accesses=[days_ago(40)])
    for mid in (kept, goal):
        await protect_command(pool, str(mid), True)
    counts: dict[str, int] = {}
    assert await run_decay(pool, Safety(), cfg, NOW, counts) == [plain]
    assert await run_demotion(pool, Safety(), cfg, NOW, counts) == []
    assert counts == {"decayed": 1, "demoted": 0}
    assert await weight(pool, kept) == (1.0, 4.0) and await weight(pool, goal) == (6.0, 3.0)
    assert await weight(pool, plain) == (1.0, 5.0)
    skips = await pool.fetch("SELECT memory_id, actor, evidence->>'forgetting' AS kind FROM consolidation_log "
                             "WHERE operation = $1 ORDER BY memory_id", PROTECTED_SKIP)
    assert [(r["memory_id"], r["actor"], r["kind"]) for r in skips] == [(kept, "decay", "decay"),
                                                                        (goal, "demotion", "demotion")]
