"""Phase C's entropy and coherence monitors act (plan §3.9, issue 25 item 2), on real PostgreSQL.

Entropy: a handful of memories running away in a 20,000-memory store trips the monitor,
which reads the top-K by center (over every center the entropy is ≈ log2 N and does not
move); enforced, sampling is broadened for `broaden_cycles` cycles. Coherence: a drop
pauses promotion for `promotion_pause_cycles` cycles. In shadow mode the same events are
written, saying what would have happened, and nothing changes.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from src.consolidation.evolution.promotion import run_promotion
from src.consolidation.evolution.settings import EvolutionSettings
from src.consolidation.monitors import run_monitors, top_alpha_entropy
from src.weights.apply import WeightChange, apply_weight_changes
from src.weights.safety import Safety
from src.weights.settings import SafetySettings
from src.weights.stochastic import observe_many
from tests.evolution_helpers import NOW, add_memory, spread, weight

MODES = ["enforced", "shadow"]
STORE = 20_000
BAND = 60


def _safety(mode: str) -> Safety:
    return Safety(SafetySettings(phase_c=mode))


async def _events(pool, ceiling: str) -> list[dict]:
    rows = await pool.fetch("SELECT enforced, reason, action FROM safety_events WHERE ceiling = $1 ORDER BY id",
                            ceiling)
    return [{"enforced": r["enforced"], "reason": r["reason"], **json.loads(r["action"])} for r in rows]


async def _realistic_store(pool) -> list[int]:
    """20,000 everyday memories (centers 0.13–0.4) and a band of 60 reinforced ones (0.6–0.85),
    in two set-based INSERTs; the ids of five everyday memories that will run away."""
    await pool.execute(
        """INSERT INTO memories (content, depth_weight_alpha, depth_weight_beta)
           SELECT 'an everyday memory ' || g, 1 + (g % 5) * 0.25, 3 + (g % 7) * 0.5
             FROM generate_series(1, $1) AS g""", STORE)
    await pool.execute(
        """INSERT INTO memories (content, depth_weight_alpha, depth_weight_beta)
           SELECT 'a well-used memory ' || g, 5 + (g % 8), 2 + (g % 3)
             FROM generate_series(1, $1) AS g""", BAND)
    return [r["id"] for r in await pool.fetch(
        "SELECT id FROM memories WHERE depth_weight_alpha = 1 AND depth_weight_beta = 4 ORDER BY id LIMIT 5")]


async def _run_away(pool, ids: list[int], safety: Safety) -> None:
    """Reinforce the handful (each time on a new query) until the hard ceiling stops them."""
    for i in range(500):
        outcomes = await apply_weight_changes(pool, [WeightChange(mid, "reinforce", 5.0, "retrieval", "retrieved",
                                                                  {"query": f"loop {i}"}) for mid in ids],
                                              safety=safety)
        if all(o.blocked_by == "hard_ceiling" for o in outcomes):
            return
    raise AssertionError("the runaway never reached the ceiling")


@pytest.mark.parametrize("mode", MODES)
async def test_a_handful_running_away_in_a_big_store_trips_the_entropy_monitor(pool, mode):
    runaway = await _realistic_store(pool)
    safety = _safety(mode)
    healthy = [await run_monitors(pool, safety, "light_consolidation") for _ in range(6)]
    assert all(r.passed["entropy"] for r in healthy) and await _events(pool, "entropy_monitor") == []
    before = healthy[-1]
    await _run_away(pool, runaway, safety)
    assert all([(await weight(pool, mid))[0] > 70 for mid in runaway])       # centers at the 0.95 ceiling
    after = await run_monitors(pool, safety, "light_consolidation")
    # over every center the runaway is invisible; over the top-K it is not
    assert abs(after.entropy_bits - before.entropy_bits) / before.entropy_bits < 0.001
    assert (before.top_entropy_bits - after.top_entropy_bits) / before.top_entropy_bits > 0.10
    [event] = await _events(pool, "entropy_monitor")
    assert event["enforced"] is (mode == "enforced") and event["top_k"] == 20 and event["memories"] == STORE + BAND
    assert event["reason"].endswith("(limit 10%); broaden sampling")
    if mode == "enforced":
        assert event["effect"] == "sampling broadened for 5 cycles"
        assert safety.sampling_broadened and safety.sampling_evidence_cap() == 4.0
        assert safety.status_line().endswith("phase C enforced; sampling broadened (5 cycles left)")
        assert after.passed["entropy"] is False
    else:
        assert event["effect"] == "would broaden sampling for 5 cycles"
        assert not safety.sampling_broadened and safety.sampling_evidence_cap() is None
        assert after.passed["entropy"] is True


async def test_broadened_sampling_ends_after_its_cycles():
    safety = _safety("enforced")
    for _ in range(6):
        safety.observe_entropy(4.3, memories=10)
    assert safety.observe_entropy(3.0, memories=10)[0] is False
    for _ in range(4):
        safety.close_cycle()
        assert safety.sampling_broadened
    safety.close_cycle()
    assert not safety.sampling_broadened


def test_broadened_draws_keep_the_center_and_widen():
    rng = np.random.default_rng(25)
    alpha, beta = np.full(20000, 76.0), np.full(20000, 4.0)
    plain = observe_many(alpha, beta, rng)
    broad = observe_many(alpha, beta, rng, evidence_cap=4.0)
    assert plain.mean() == pytest.approx(0.95, abs=0.002) and broad.mean() == pytest.approx(0.95, abs=0.005)
    assert broad.std() > 3 * plain.std()
    low = observe_many(np.full(5, 1.0), np.full(5, 2.0), np.random.default_rng(1), evidence_cap=4.0)
    assert np.array_equal(low, observe_many(np.full(5, 1.0), np.full(5, 2.0), np.random.default_rng(1)))


async def test_top_k_reads_the_index_and_leaves_immutable_memories_out(pool):
    await pool.execute("""INSERT INTO memories (content, depth_weight_alpha, depth_weight_beta, immutable)
                          VALUES ('boundary', 50, 1, true), ('a', 8, 2, false), ('b', 8, 2, false)""")
    bits, n = await top_alpha_entropy(pool, 20)
    assert (bits, n) == (pytest.approx(1.0), 2)


async def _contested_drop(pool, safety: Safety) -> None:
    """Two monitor cycles, the second after half the store became contested (C drops by 0.21)."""
    await pool.execute("INSERT INTO memories (content, depth_weight_alpha, depth_weight_beta) "
                       "SELECT 'settled ' || g, 9, 1 FROM generate_series(1, 4) g")
    await run_monitors(pool, safety, "light_consolidation")
    await pool.execute("INSERT INTO memories (content, depth_weight_alpha, depth_weight_beta) "
                       "SELECT 'contested ' || g, 6, 6 FROM generate_series(1, 4) g")
    await run_monitors(pool, safety, "light_consolidation")


@pytest.mark.parametrize("mode", MODES)
async def test_a_coherence_drop_pauses_promotion(pool, mode):
    mid = await add_memory(pool, "likes tea", alpha=2.0, beta=4.0, accesses=spread(5, 14.0))
    safety = _safety(mode)
    await _contested_drop(pool, safety)
    [event] = await _events(pool, "cba_coherence")
    assert event["enforced"] is (mode == "enforced")
    assert event["reason"].startswith("coherence fell from 1.000 to 0.822")
    counts: dict[str, int] = {}
    await run_promotion(pool, safety, EvolutionSettings(), NOW, counts)
    if mode == "shadow":
        assert event["effect"] == "would pause promotion for 5 cycles"
        assert counts == {"promotion_applied": 1}
        return
    assert event["effect"] == "promotion paused for 5 cycles"
    assert counts == {"promotion_paused": 1} and await weight(pool, mid) == (2.0, 4.0)
    for _ in range(5):                                   # the pause runs out with its cycles
        await run_monitors(pool, safety, "light_consolidation")
    counts = {}
    await run_promotion(pool, safety, EvolutionSettings(), NOW, counts)
    assert counts == {"promotion_applied": 1}
