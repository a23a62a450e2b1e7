"""Issue 40 item 6: the merge reaches older duplicates and pays once for what it asks."""

from __future__ import annotations

import asyncio
import json
import random
from datetime import UTC, datetime

import pytest

from src.consolidation.deep.deep_pass import DEEP_PHASES, ConsolidationParts, run_deep_pass
from src.consolidation.settings import ConsolidationSettings
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.consolidation_fakes import ConsolidationModel, ids_in, language_model
from tests.fakes import HashEmbedder

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
MERGE_ONLY = [p for p in DEEP_PHASES if p.name == "merge"]
TOPICS = ["i deploy my small projects with one simple shell script, 3 of them",
          "every sunday we bake sourdough bread with rye flour, 2 loaves",
          "the cat sleeps on the warm radiator until 7 every morning",
          "we walk along the river for 5 kilometres after dinner"]


async def merge_pass(pool, embedder, llm=None, settings=None):
    report = await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=llm, safety=Safety(),
                                                    settings=settings or ConsolidationSettings()),
                                 trigger="manual", now=NOW, rng=random.Random(7), phases=MERGE_ONLY)
    assert report.status == "done", report.error
    return report


async def merged_sources(pool) -> list[list[int]]:
    rows = await pool.fetch("""SELECT array_agg(source_id ORDER BY source_id) AS s FROM memory_supersedes
                                WHERE via = 'merge' GROUP BY insight_id ORDER BY min(source_id)""")
    return [list(r["s"]) for r in rows]


async def test_duplicates_older_than_the_newest_500_are_merged_within_two_passes(pool):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    dups = await store.store_many([NewMemory(TOPICS[1]), NewMemory(TOPICS[1])])
    await store.store_many([NewMemory(f"entry{i}a word{i}b thing{i}c") for i in range(600)])   # newer, distinct
    found = []
    for _ in range(3):                  # 602 memories, a walk window of 500 a pass: 2 passes reach all
        await merge_pass(pool, embedder)
        found = await merged_sources(pool)
        if found:
            break
    assert found == [sorted(dups)]
    walk = await pool.fetchrow("SELECT * FROM consolidation_walks WHERE name = 'merge'")
    assert walk is not None


def _one_bad(backend: ConsolidationModel, bad: list[list[int]]):
    """The fake's merge reply, with cluster 1's insight dropping its number (validate_merge rejects it)."""
    def answer(request):
        prompt = request.messages[0].content
        got = backend._merge(prompt)
        first = got["insights"][0]
        first["insight"] = "Simple routines matter."
        bad.append(first["cited_ids"])
        return json.dumps(got)
    return answer


async def test_a_batch_with_one_rejected_cluster_keeps_three_merges_and_asks_that_one_once_more(pool):
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many([NewMemory(t) for t in TOPICS for _ in range(2)])
    backend = ConsolidationModel()
    bad: list[list[int]] = []
    backend.push("merge", _one_bad(backend, bad), _one_bad(backend, bad))     # wrong again when alone
    report = await merge_pass(pool, embedder, language_model(backend, pool))
    # 5 calls before (the batch split twice): now the batch, then the rejected cluster alone
    assert backend.kinds() == ["merge", "merge"]
    assert sorted(bad[1]) == sorted(bad[0])
    assert report.phases["merge"]["counts"]["insights"] == 3
    merged = await merged_sources(pool)
    assert len(merged) == 3 and sorted(bad[0]) not in merged
    items = json.loads(await pool.fetchval("SELECT items FROM consolidation_failures"))
    assert [sorted(i["cluster"]) for i in items] == [sorted(bad[0])]


async def test_a_resumed_pass_does_not_ask_again_a_cluster_it_rejected(pool):
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many([NewMemory(t) for t in TOPICS[:2] for _ in range(2)])
    settings = ConsolidationSettings(deep={"merge_batch": 1})
    reached = asyncio.Event()
    rejected: list[int] = []

    class RejectsThenHangs(ConsolidationModel):
        async def complete(self, request):
            if self.requests:                 # the first cluster's answer was rejected and recorded
                reached.set()
                await asyncio.sleep(3600)     # killed while the model thinks about the second
            return await super().complete(request)

    first = RejectsThenHangs()

    def bad(request):
        ids = ids_in(request.messages[0].content)
        rejected.extend(ids)
        return json.dumps({"insights": [{"cluster": 1, "insight": "Simple routines matter.", "cited_ids": ids}]})
    first.push("merge", bad)
    task = asyncio.create_task(run_deep_pass(
        ConsolidationParts(pool, embedder=embedder, llm=language_model(first, pool), safety=Safety(),
                           settings=settings),
        trigger="manual", now=NOW, rng=random.Random(7), phases=MERGE_ONLY))
    await asyncio.wait_for(reached.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    backend = ConsolidationModel()
    report = await merge_pass(pool, embedder, language_model(backend, pool), settings)
    assert report.resumed
    assert backend.kinds() == ["merge"]                                  # only the cluster never answered
    assert not set(ids_in(backend.requests[0].messages[0].content)) & set(rejected)
    assert len(await merged_sources(pool)) == 1
