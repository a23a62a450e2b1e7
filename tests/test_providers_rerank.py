"""FlashRank reranking (plan §2.6) with a tiny ONNX cross-encoder built by the test."""

from __future__ import annotations

import pytest

from src.errors import ProviderSkipped
from src.providers.rerank_flashrank import FlashRankReranker, flashrank_missing
from src.providers.rerank_skipped import SkippedReranker
from tests.providers.tiny_cross_encoder import build_tiny_cross_encoder, expected_score

MODEL = "ms-marco-MiniLM-L-12-v2"


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory):
    cache = tmp_path_factory.mktemp("flashrank")
    build_tiny_cross_encoder(cache, MODEL)
    return cache


async def test_real_flashrank_scores_passages_in_input_order(model_cache):
    reranker = FlashRankReranker(model_cache, MODEL)
    query = "where does the cat sleep"
    passages = [
        "paris is the capital of france",
        "the cat sleeps on the mat",
        "coffee in the morning",
        "my cat sleeps in the kitchen window",
    ]
    scores = await reranker.rerank(query, passages)
    assert scores == pytest.approx([expected_score(query, p) for p in passages], abs=1e-6)
    assert sorted(range(4), key=lambda i: -scores[i])[:2] == [1, 3]
    assert all(0.0 < s < 1.0 for s in scores)
    assert reranker.skipped is False and reranker.skip_reason is None


async def test_reranking_is_deterministic_and_handles_no_passages(model_cache):
    reranker = FlashRankReranker(model_cache, MODEL)
    passages = [f"passage about {w}" for w in ("jazz", "piano", "database", "tea")] * 5
    first = await reranker.rerank("jazz piano music", passages)
    assert len(first) == 20
    assert await reranker.rerank("jazz piano music", passages) == first
    assert await reranker.rerank("anything", []) == []


def test_missing_or_incomplete_model_folder_is_reported(tmp_path, model_cache):
    assert flashrank_missing(model_cache, MODEL) is None
    assert flashrank_missing(tmp_path, MODEL) == f"model folder missing: {tmp_path}/{MODEL}"
    assert flashrank_missing("./data/none", MODEL) == f"model folder missing: ./data/none/{MODEL}"
    (tmp_path / MODEL).mkdir()
    (tmp_path / MODEL / "tokenizer.json").write_text("{}")
    assert flashrank_missing(tmp_path, MODEL) == (
        f"model folder incomplete: {tmp_path}/{MODEL} lacks flashrank-MiniLM-L-12-v2_Q.onnx, "
        "config.json, tokenizer_config.json, special_tokens_map.json")
    assert flashrank_missing(tmp_path, "no-such-model") == "unknown FlashRank model 'no-such-model'"
    with pytest.raises(FileNotFoundError, match="model folder missing"):
        FlashRankReranker(tmp_path / "elsewhere", MODEL)
    assert not (tmp_path / "elsewhere").exists()  # nothing created, nothing downloaded


async def test_skipped_reranker_says_why():
    reranker = SkippedReranker("model folder missing: ./data/models/flashrank/ms-marco-MiniLM-L-12-v2")
    assert reranker.skipped is True
    with pytest.raises(ProviderSkipped, match=r"^reranking skipped: model folder missing: ./data/models/"):
        await reranker.rerank("q", ["p"])
