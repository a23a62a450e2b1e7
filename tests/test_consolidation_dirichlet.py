"""Recall outcomes -> Q-value utility and Dirichlet alpha evolution (§4.3, §4.5); weight observation."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from src.consolidation.evolution.dirichlet_evolution import (
    evolve_factors,
    observe_weights,
    run_outcomes,
    top_component,
)
from src.consolidation.evolution.settings import DirichletSettings, EvolutionSettings
from src.consolidation.evolution.utility import fold_rewards
from src.db.deferred import run_now
from src.recall.dirichlet import evolved_alpha
from src.recall.relevance import COMPONENTS, blend_alpha
from src.recall.retrieval import Retriever
from src.recall.settings import RetrievalSettings
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.evolution_helpers import NOW, add_memory, days_ago
from tests.fakes import HashEmbedder

CFG = EvolutionSettings()
SEMANTIC_TOP = [0.5, 0.1, 0.05, 0.1, 0.05]
RECENCY_TOP = [0.1, 0.05, 0.05, 0.1, 0.4]


def test_top_component_and_the_step():
    assert top_component(SEMANTIC_TOP) == 0 and top_component(RECENCY_TOP) == 4
    cfg = DirichletSettings()
    after = evolve_factors({}, used_tops=[0] * 10, all_tops=[0] * 10 + [4] * 10, cfg=cfg)
    assert after == {"semantic": pytest.approx(math.exp(0.25)), "coactivation": 1.0, "noise": 1.0,
                     "emotional": 1.0, "recency": pytest.approx(math.exp(-0.25))}
    # independent of use: nothing moves; bounds hold however long it runs
    assert evolve_factors({}, [0, 4], [0, 4, 0, 4], cfg) == {c: 1.0 for c in COMPONENTS}
    f: dict[str, float] = {}
    for _ in range(50):
        f = evolve_factors(f, [0] * 10, [0] * 10 + [4] * 10, cfg)
    assert (f["semantic"], f["recency"]) == (2.0, 0.5)
    assert evolved_alpha(blend_alpha(0.0), f)["semantic"] == 24.0


def test_fold_rewards_matches_sequential_updates_for_equal_rewards():
    q = 0.3
    for _ in range(4):
        q += 0.1 * (1.0 - q)
    step, mean = fold_rewards([1.0] * 4, 0.1)
    assert 0.3 + step * (mean - 0.3) == pytest.approx(q)


async def _outcome(pool, memory_id, contributions, at):
    await pool.execute("INSERT INTO recall_outcomes (at, memory_id, rank, contributions) VALUES ($1, $2, 1, $3)",
                       at, memory_id, contributions)


async def test_alphas_move_toward_the_component_that_predicted_use(pool):
    used, unused = [], []
    for i in range(10):
        used.append(await add_memory(pool, f"used {i}", accesses=[days_ago(10), days_ago(9)]))
        unused.append(await add_memory(pool, f"unused {i}", accesses=[days_ago(10)]))
    for mid in used:
        await _outcome(pool, mid, SEMANTIC_TOP, days_ago(10))
        # used = the answer of that cycle drew on it (issue 25), not the re-access all of them had
        await pool.execute("INSERT INTO memory_uses (at, memory_id, kind, valence, share) "
                           "VALUES ($1, $2, 'reflected', 0, 0.5)", days_ago(10), mid)
    for mid in unused:
        await _outcome(pool, mid, RECENCY_TOP, days_ago(10))
    await _outcome(pool, used[0], SEMANTIC_TOP, days_ago(1))        # its window is still open
    counts: dict[str, int] = {}
    factors = await run_outcomes(pool, CFG, NOW, counts)
    assert counts == {"outcomes_scored": 20, "utility_updated": 20, "dirichlet_steps": 1}
    assert factors["semantic"] == pytest.approx(math.exp(0.25)) and factors["recency"] == pytest.approx(
        math.exp(-0.25))
    stored = {r["component"]: r["factor"] for r in await pool.fetch("SELECT component, factor FROM dirichlet_alphas")}
    assert stored == pytest.approx(factors)
    history = await pool.fetchrow("SELECT at, before, after, evidence FROM dirichlet_history")
    evidence = json.loads(history["evidence"])
    assert (history["at"], evidence["scored"], evidence["used"]) == (NOW, 20, 10)
    assert evidence["top_used"] == {"semantic": 10, "coactivation": 0, "noise": 0, "emotional": 0, "recency": 0}
    assert json.loads(history["before"]) == {c: 1.0 for c in COMPONENTS}
    q = {r["id"]: r["utility_score"] for r in await pool.fetch("SELECT id, utility_score FROM memories")}
    assert [q[m] for m in used] == [pytest.approx(0.1)] * 10
    assert [q[m] for m in unused] == [pytest.approx(-0.025)] * 10      # left alone: -0.25 (utility.py)
    assert await pool.fetchval("SELECT count(*) FROM recall_outcomes WHERE scored_at IS NULL") == 1
    assert await run_outcomes(pool, CFG, NOW, {}) is None             # nothing due twice


async def test_too_few_outcomes_update_utility_but_not_the_alphas(pool):
    mid = await add_memory(pool, "once", accesses=[days_ago(10)])
    await _outcome(pool, mid, SEMANTIC_TOP, days_ago(10))
    counts: dict[str, int] = {}
    assert await run_outcomes(pool, CFG, NOW, counts) is None
    assert counts == {"outcomes_scored": 1, "utility_updated": 1}
    assert await pool.fetchval("SELECT count(*) FROM dirichlet_alphas") == 0


async def test_recall_records_contributions_and_reads_the_evolved_alphas(pool):
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many([NewMemory(f"the harbour lighthouse story {i}") for i in range(8)])
    retriever = Retriever(pool, embedder, None, Safety(), RetrievalSettings())
    result = await retriever.retrieve("lighthouse harbour", rng=np.random.default_rng(5), now=NOW)
    assert await pool.fetchval("SELECT count(*) FROM recall_outcomes") == 0    # handed back, not run
    await run_now(result.writes)
    rows = await pool.fetch("SELECT memory_id, rank, contributions, at FROM recall_outcomes ORDER BY rank")
    assert [r["memory_id"] for r in rows] == result.ids and [r["rank"] for r in rows] == list(range(1, 6))
    blend = np.array([result.blend[c] for c in COMPONENTS])
    first = result.memories[0]
    assert rows[0]["contributions"] == pytest.approx(list(np.array(first.components) * blend))
    assert rows[0]["at"] == NOW
    # evolved factors reach the blend: a retriever that read the table before they existed
    # keeps its cached read (refresh every 60 s); a new one samples with semantic x2, the rest x0.5
    plain = Retriever(pool, embedder, None, Safety(), RetrievalSettings())
    await plain.retrieve("lighthouse harbour", rng=np.random.default_rng(0), now=NOW, mutate=False)
    await pool.execute("""INSERT INTO dirichlet_alphas (component, factor, updated_at)
                          SELECT c, CASE c WHEN 'semantic' THEN 2.0 ELSE 0.5 END, now()
                            FROM unnest($1::text[]) AS c""", list(COMPONENTS))
    evolved = Retriever(pool, embedder, None, Safety(), RetrievalSettings())
    shares = {}
    for name, r in (("plain", plain), ("evolved", evolved)):
        draws = [(await r.retrieve("lighthouse harbour", rng=np.random.default_rng(s), now=NOW, mutate=False))
                 .blend["semantic"] for s in range(40)]
        shares[name] = float(np.mean(draws))
    # Dirichlet means: semantic 12/17 = 0.71 at cold start; with the factors 24/26.5 = 0.91
    assert shares["plain"] == pytest.approx(12 / 17, abs=0.05)
    assert shares["evolved"] == pytest.approx(24 / 26.5, abs=0.05)


async def test_pathological_weights_are_logged(pool):
    bad = await add_memory(pool, "runaway", alpha=5000.0, beta=2.0)
    await add_memory(pool, "fine", alpha=30.0, beta=25.0)
    counts: dict[str, int] = {}
    assert await observe_weights(pool, CFG, counts) == 1
    ev = await pool.fetchrow("SELECT ceiling, phase, enforced, memory_id, reason FROM safety_events")
    assert tuple(ev) == ("beta_pathology", "C", False, bad, "alpha or beta above 1000: Beta(5000.0, 2.0)")
    assert counts == {"pathological_weights": 1}


async def test_old_scored_outcomes_are_pruned(pool):
    mid = await add_memory(pool, "once", accesses=[days_ago(40)])
    await pool.execute("INSERT INTO recall_outcomes (at, memory_id, rank, contributions, used, scored_at) "
                       "VALUES ($1, $2, 1, $3, false, $4)", days_ago(40), mid, SEMANTIC_TOP, days_ago(35))
    await _outcome(pool, mid, SEMANTIC_TOP, days_ago(20))       # scored now, kept for a while
    await run_outcomes(pool, CFG, NOW, {})
    rows = await pool.fetch("SELECT at, scored_at FROM recall_outcomes")
    assert [(r["at"], r["scored_at"]) for r in rows] == [(days_ago(20), NOW)]


async def test_weight_history_is_queryable(pool):
    from src.weights.apply import WeightChange, apply_weight_changes
    from src.weights.history import weight_history_text

    mid = await add_memory(pool, "tracked", alpha=2.0, beta=2.0)
    assert await weight_history_text(pool, mid) == f"memory {mid} has no recorded weight changes"
    await apply_weight_changes(pool, [WeightChange(mid, "contradict", 1.0, "decay", "old\x1b")], safety=Safety())
    lines = (await weight_history_text(pool, mid)).splitlines()
    assert lines[0] == f"weight history of memory {mid} (newest first):"
    assert lines[1].endswith("decay            contradict +1.000 -> Beta(2.00, 3.00) center 0.400  old\\x1b")
