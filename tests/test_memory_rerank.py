"""The rerank stage (plan §2.6): top-20 → top-5, final = 0.6 * rerank + 0.4 * weighted."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from src.errors import ProviderUnavailable
from src.providers.rerank_skipped import SkippedReranker
from src.recall.search import SearchHit, fetch_hits, normalise_scores, rerank_hits, search_hybrid
from src.recall.store import MemoryStore, NewMemory
from tests.fakes import HashEmbedder
from tests.fakes_rerank import FakeReranker

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


def _hit(i: int, score: float, content: str | None = None) -> SearchHit:
    return SearchHit(
        id=i, content=content or f"passage {i}", compressed=None, memory_type="episodic",
        alpha=1.0, beta=4.0, immutable=False, source_tag="external_user", source_confidence=1.0,
        access_count=0, last_accessed=None, access_timestamps=[], event_time=None, created_at=NOW,
        metadata={}, embedding=None, embed_model=None, similarity=None, vec_rank=i, fts_rank=None,
        fts_score=None, rrf=score, recency=0.0, score=score)


# scores 1.0, 0.9, … 0.1, 0.0 for ids 1…11: weighted (min-max) = 1.0, 0.9, …, 0.0
HITS = [_hit(i, (11 - i) / 10) for i in range(1, 12)]


def test_normalise_scores_min_max():
    assert normalise_scores([3.0, 2.0, 1.0]) == [1.0, 0.5, 0.0]
    assert normalise_scores([0.7, 0.7]) == [1.0, 1.0]
    assert normalise_scores([0.2]) == [1.0]
    assert normalise_scores([]) == []


async def test_fake_reranker_receives_the_query_and_exact_passages_and_reorders_by_0_6_0_4():
    # the cross-encoder prefers higher ids: score = id / 11
    reranker = FakeReranker(score=lambda q, p: int(p.split()[1]) / 11)
    result = await rerank_hits(reranker, "which passage?", list(reversed(HITS)), keep=5)
    assert [(c.query, c.passages) for c in reranker.calls] == [
        ("which passage?", [f"passage {i}" for i in range(1, 12)])]  # best hybrid score first
    assert result.skipped_reason is None and result.reranked
    finals = {i: 0.6 * (i / 11) + 0.4 * ((11 - i) / 10) for i in range(1, 12)}
    expected = sorted(finals, key=lambda i: -finals[i])[:5]
    assert [r.hit.id for r in result.hits] == expected == [11, 10, 9, 8, 7]
    for r in result.hits:
        assert r.rerank == r.hit.id / 11
        assert r.weighted == pytest.approx((11 - r.hit.id) / 10, abs=1e-12)
        assert r.final == pytest.approx(finals[r.hit.id], abs=1e-12)


async def test_final_score_is_exactly_the_0_6_0_4_blend():
    scores = {"passage 1": 0.50, "passage 2": 0.60}  # reranker slightly prefers 2
    reranker = FakeReranker(score=lambda q, p: scores.get(p, 0.0))
    result = await rerank_hits(reranker, "q", HITS, keep=2)
    # 1: 0.6*0.5 + 0.4*1.0 = 0.70; 2: 0.6*0.6 + 0.4*0.9 = 0.72 → 2 wins, by the formula
    assert [(r.hit.id, round(r.final, 12)) for r in result.hits] == [(2, 0.72), (1, 0.7)]


async def test_given_scores_order_and_weigh_the_batch_instead_of_the_hits_own():
    # recall passes its weighted scores beside the hits: ids 1…11 reversed by them
    reranker = FakeReranker(score=lambda q, p: 0.5)
    result = await rerank_hits(reranker, "q", HITS, keep=3, hit_scores=[i / 10 for i in range(1, 12)])
    assert reranker.calls[0].passages == [f"passage {i}" for i in range(11, 0, -1)]
    assert [r.hit.id for r in result.hits] == [11, 10, 9]
    assert [round(r.weighted, 12) for r in result.hits] == [1.0, 0.9, 0.8]
    with pytest.raises(ValueError):   # a score for each hit, no fewer
        await rerank_hits(reranker, "q", HITS, hit_scores=[1.0])


async def test_only_the_top_20_are_reranked():
    hits = [_hit(i, 1.0 / i) for i in range(1, 31)]
    reranker = FakeReranker(score=lambda q, p: 0.5)
    result = await rerank_hits(reranker, "q", hits)
    assert reranker.calls[0].passages == [f"passage {i}" for i in range(1, 21)]
    assert [r.hit.id for r in result.hits] == [1, 2, 3, 4, 5]


async def test_long_passages_are_cut_for_the_cross_encoder():
    reranker = FakeReranker(score=lambda q, p: 0.5)
    await rerank_hits(reranker, "q", [_hit(1, 1.0, "x" * 10_000)], max_passage_chars=4000)
    assert reranker.calls[0].passages == ["x" * 4000]


@pytest.mark.parametrize(("reranker", "reason"), [
    (None, "no reranker configured"),
    (SkippedReranker("no cross-encoder model in any registry package"),
     "no cross-encoder model in any registry package"),
    (FakeReranker(score=lambda q, p: 0.5, error=ProviderUnavailable("onnx session crashed")),
     "reranker fake-rerank failed: onnx session crashed"),
    (FakeReranker(score=lambda q, p: float("nan")),
     "reranker fake-rerank returned 11 scores for 11 passages (or a non-finite score)"),
])
async def test_skipped_or_failing_reranker_keeps_the_hybrid_top_5_and_says_why(reranker, reason):
    result = await rerank_hits(reranker, "q", HITS)
    assert result.skipped_reason == reason and not result.reranked
    assert [r.hit.id for r in result.hits] == [1, 2, 3, 4, 5]
    assert [(r.rerank, r.final) for r in result.hits] == [
        (None, pytest.approx(w, abs=1e-12)) for w in (1.0, 0.9, 0.8, 0.7, 0.6)]


async def test_a_reranker_that_raises_provider_skipped_is_reported():
    from src.errors import ProviderSkipped

    reranker = FakeReranker(score=lambda q, p: 0.5, error=ProviderSkipped("reranking skipped: off"))
    result = await rerank_hits(reranker, "q", HITS)
    assert result.skipped_reason == "reranking skipped: off"


async def test_nothing_to_rerank():
    reranker = FakeReranker(score=lambda q, p: 0.5)
    result = await rerank_hits(reranker, "q", [])
    assert (result.hits, result.skipped_reason, reranker.calls) == ([], None, [])


async def test_rerank_over_real_search_hits(pool):
    embedder = HashEmbedder()
    texts = ["green tea with mint", "black tea and milk", "tea ceremony in Kyoto",
             "coffee beans", "peppermint plant", "a pot of tea", "tea stains"]
    ids = await MemoryStore(pool, embedder).store_many([NewMemory(t) for t in texts])
    qvec = (await embedder.embed(["tea"], "RETRIEVAL_QUERY"))[0]
    hits = await search_hybrid(pool, "tea", qvec, embed_model=embedder.model_name, now=NOW)
    reranker = FakeReranker(score=lambda q, p: 1.0 if "Kyoto" in p else 0.0)
    result = await rerank_hits(reranker, "tea", hits)
    assert reranker.calls[0].passages == [h.content for h in hits]
    assert result.hits[0].hit.content == "tea ceremony in Kyoto"
    assert len(result.hits) == 5 and set(r.hit.id for r in result.hits) <= set(ids)


async def test_fetch_hits_reads_given_ids_in_order(pool):
    embedder = HashEmbedder()
    ids = await MemoryStore(pool, embedder).store_many(
        [NewMemory(t) for t in ["alpha one", "beta two", "gamma three"]])
    qvec = (await embedder.embed(["beta"], "RETRIEVAL_QUERY"))[0]
    hits = await fetch_hits(pool, [ids[2], 999_999, ids[0]], qvec,
                            embed_model=embedder.model_name, now=NOW)
    assert [(h.id, h.content, h.vec_rank, h.fts_rank, h.rrf) for h in hits] == [
        (ids[2], "gamma three", None, None, 0.0), (ids[0], "alpha one", None, None, 0.0)]
    assert all(h.similarity is not None and h.score == 0.0 and 0 < h.recency <= 1 for h in hits)
    assert await fetch_hits(pool, [], None, embed_model=embedder.model_name) == []
    [h] = await fetch_hits(pool, [ids[1]], None, embed_model=embedder.model_name)
    assert h.similarity is None
