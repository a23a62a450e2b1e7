"""Near-miss suppression queued for the light ticker (plan §3.8, src/recall/mutation.py):
the retrieval's transaction queues one row, the ticker applies what is queued summed per
memory, exactly once, through the weight choke point. Real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import random
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from src.config import load_settings
from src.consolidation.light.ticker import LightTicker
from src.consolidation.settings import ConsolidationSettings
from src.db.manifest import record_start
from src.mind import build_mind
from src.providers.costs import MemoryLedger
from src.providers.endpoint_gate import EndpointGates
from src.recall.mutation import apply_near_misses, mutate_after_retrieval
from src.recall.settings import RetrievalSettings
from src.weights.safety import Safety
from tests.fakes import HashEmbedder

AT = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)


async def _memories(pool, n: int) -> list[int]:
    return [r["id"] for r in await pool.fetch(
        """INSERT INTO memories (content, depth_weight_alpha, depth_weight_beta)
           SELECT 'memory ' || i, 2.0, 2.0 FROM generate_series(1, $1) i RETURNING id""", n)]


async def _beta(pool, ids) -> dict[int, float]:
    return {r["id"]: r["b"] for r in await pool.fetch(
        "SELECT id, depth_weight_beta b FROM memories WHERE id = ANY($1)", ids)}


async def test_queued_near_misses_are_summed_per_memory_and_applied_once(pool):
    retrieved, a, b, c = await _memories(pool, 4)
    await mutate_after_retrieval(pool, [retrieved], [a, b], safety=Safety(), at=AT, query="first question")
    await mutate_after_retrieval(pool, [retrieved], [b, c], safety=Safety(), at=AT + timedelta(seconds=5),
                                 query="second question")
    assert await _beta(pool, [a, b, c]) == {a: 2.0, b: 2.0, c: 2.0}          # queued, not applied
    assert await apply_near_misses(pool, Safety(), limit=10) == 3
    assert await _beta(pool, [a, b, c]) == {a: 2.05, b: 2.1, c: 2.05}
    rows = {r["memory_id"]: r for r in await pool.fetch(
        """SELECT memory_id, requested_delta, applied_delta, beta_before, beta_after, evidence
             FROM consolidation_log WHERE reason = 'near miss'""")}
    assert set(rows) == {a, b, c}                                        # one row each, b's two summed
    assert (rows[b]["applied_delta"], rows[b]["beta_before"], rows[b]["beta_after"]) == (0.1, 2.0, 2.1)
    assert json.loads(rows[b]["evidence"]) == {"query": "second question", "times": 2}
    assert json.loads(rows[a]["evidence"]) == {"query": "first question"}
    assert await apply_near_misses(pool, Safety(), limit=10) == 0             # nothing is applied twice
    assert await _beta(pool, [a, b, c]) == {a: 2.05, b: 2.1, c: 2.05}


async def test_a_tick_applies_at_most_its_batch_oldest_first(pool):
    retrieved, *near = await _memories(pool, 4)
    for i, mid in enumerate(near):
        await mutate_after_retrieval(pool, [retrieved], [mid], safety=Safety(), at=AT + timedelta(seconds=i))
    assert await apply_near_misses(pool, Safety(), limit=2) == 2
    assert await _beta(pool, near) == {near[0]: 2.05, near[1]: 2.05, near[2]: 2.0}
    assert [r["memory_ids"] for r in await pool.fetch("SELECT memory_ids FROM near_miss_pending")] == [[near[2]]]


async def test_two_appliers_at_once_apply_each_queued_row_once(pool):
    retrieved, *near = await _memories(pool, 7)
    for _ in near:
        await mutate_after_retrieval(pool, [retrieved], near, safety=Safety(), at=AT)   # six rows, all six ids
    counts = await asyncio.gather(apply_near_misses(pool, Safety(), limit=3),
                                  apply_near_misses(pool, Safety(), limit=3))
    assert counts == [6, 6]                              # each claimed three rows, none the other's
    assert set((await _beta(pool, near)).values()) == {2.0 + 6 * 0.05}
    assert await pool.fetchval("SELECT count(*) FROM near_miss_pending") == 0


async def test_applied_at_retrieval_when_not_deferred(pool):
    retrieved, a = await _memories(pool, 2)
    cfg = RetrievalSettings(near_miss_deferred=False)
    await mutate_after_retrieval(pool, [retrieved], [a], safety=Safety(), at=AT, settings=cfg, query="q")
    assert (await _beta(pool, [a]))[a] == 2.05
    assert await pool.fetchval("SELECT count(*) FROM near_miss_pending") == 0


async def test_the_light_ticker_applies_the_queue_every_tick(pool):
    retrieved, a = await _memories(pool, 2)
    await mutate_after_retrieval(pool, [retrieved], [a], safety=Safety(), at=AT)
    ticker = LightTicker(pool, embedder=HashEmbedder(), llm=None, safety=Safety(),
                         settings=ConsolidationSettings(light={"contradiction_samples": 0}),
                         rng=random.Random(1), clock=lambda: AT)
    assert (await ticker.tick())["near_misses"] == 1
    assert (await _beta(pool, [a]))[a] == 2.05
    await mutate_after_retrieval(pool, [retrieved], [a], safety=Safety(), at=AT)
    assert (await ticker.tick(AT + timedelta(seconds=10)))["near_misses"] == 1    # interval 0: every tick


async def test_a_mind_without_the_light_ticker_applies_near_misses_at_retrieval(pool, tmp_path):
    layers = {"values_path": str(tmp_path / "v.json"), "goals_path": str(tmp_path / "g.json"),
              "cache_dir": str(tmp_path / "cache")}
    providers = SimpleNamespace(endpoints=EndpointGates(), embedder=HashEmbedder(), reranker=None, system1=None,
                                system2=None, meta=None, ledger=MemoryLedger())
    deferred = []
    for enabled in (True, False):
        settings = load_settings(tmp_path / "none.yaml", env={}, overrides={
            "layers": layers, "consolidation": {"light": {"enabled": enabled}}})
        manifest = await record_start(pool, f"light-{enabled}", "fake-hash-768")
        mind = await build_mind(settings, pool, providers, session_id=f"light-{enabled}", manifest=manifest,
                                deliver=lambda text: None)
        deferred.append(mind.loop.recalling.retriever.settings.near_miss_deferred)
        await mind.close()
    assert deferred == [True, False]
