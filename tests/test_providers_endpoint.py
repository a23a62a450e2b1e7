"""Embeddings and rerank from a local model server (issue 41 item 6), against a fake server
on a real socket that checks what it is sent; built through the real factory."""

from __future__ import annotations

import logging
import random

import numpy as np
import pytest
from pydantic import SecretStr

from src.errors import (
    ConfigError,
    MalformedOutput,
    ProviderRejected,
    ProviderUnavailable,
    RateLimited,
)
from src.providers.factory import build_providers
from src.providers.settings import ProvidersSettings, Secrets
from tests.providers.fakes import Sleeps
from tests.providers.model_server import ModelServer, word_vector

KEY = "sk-local-secret-0123456789"


def build(server: ModelServer, *, embeddings: dict | None = None, rerank: dict | None = None,
          key: str | None = KEY):
    settings = ProvidersSettings.model_validate({
        "embeddings": {"provider": "openai_compat", "base_url": f"{server.url}/v1",
                       "openai_model": "mxbai-embed-large", **(embeddings or {})},
        "rerank": {"provider": "none", **(rerank or {})},
        "llm": {"provider": "reflex"},
        "resilience": {"max_attempts": 3}})
    secrets = Secrets(openai_api_key=SecretStr(key) if key else None)
    return build_providers(settings, secrets, None, "s1", sleep=Sleeps(), rng=random.Random(1))


def unit_prefix(text: str, dims: int) -> np.ndarray:
    v = np.asarray(word_vector(text, dims), dtype=np.float64)
    out = np.zeros(768)
    out[:min(768, dims)] = v[:768]
    return out / np.linalg.norm(out)


async def test_embeddings_are_batched_sent_with_the_model_and_key_and_1024_cut_to_unit_768():
    texts = [f"memory number {i} about the quokka" for i in range(7)]
    async with ModelServer(dims=1024) as server:
        providers = build(server, embeddings={"openai_batch_size": 3})
        try:
            vectors = await providers.embedder.embed(texts, "RETRIEVAL_DOCUMENT", titles=["semantic"] * 7)
        finally:
            await providers.aclose()
    sent = server.sent("/v1/embeddings")
    assert [len(s.body["input"]) for s in sent] == [3, 3, 1]
    assert [t for s in sent for t in s.body["input"]] == texts
    assert {s.body["model"] for s in sent} == {"mxbai-embed-large"}
    assert set(sent[0].body) == {"model", "input"}
    assert {s.headers["Authorization"] for s in sent} == {f"Bearer {KEY}"}
    assert vectors.shape == (7, 768) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # the reply lists the rows in reverse: each row is still its own text's first 768 components
    for text, row in zip(texts, vectors, strict=True):
        np.testing.assert_allclose(row, unit_prefix(text, 1024), atol=1e-5)
    assert providers.embedder.model_name == "mxbai-embed-large"
    assert providers.embedder.native_dimensions == 1024
    rows = providers.ledger.records
    assert [(r.provider, r.purpose, r.ok, r.tokens_in) for r in rows] == [
        ("openai_compat_embed", "embed:RETRIEVAL_DOCUMENT", True, n) for n in (21, 21, 7)]


async def test_narrower_vectors_are_zero_padded_and_task_prefixes_and_the_cut_are_applied():
    long = "word " * 1000
    async with ModelServer(dims=384) as server:
        providers = build(server, key=None, embeddings={
            "openai_max_input_chars": 100, "openai_task_prefixes": {"RETRIEVAL_QUERY": "search_query: "}})
        try:
            vectors = await providers.embedder.embed(["what is my dog called", long], "RETRIEVAL_QUERY")
            await providers.embedder.embed(["a document"], "RETRIEVAL_DOCUMENT")
        finally:
            await providers.aclose()
    first, second = server.sent("/v1/embeddings")
    assert first.body["input"] == ["search_query: what is my dog called", "search_query: " + long[:100]]
    assert second.body["input"] == ["a document"]
    assert "Authorization" not in first.headers
    assert not np.any(vectors[:, 384:])
    np.testing.assert_allclose(vectors[0], unit_prefix("search_query: what is my dog called", 384), atol=1e-5)


def _listed(n: int, dims: int = 8) -> dict:
    return {"data": [{"index": i, "embedding": [1.0] * dims} for i in range(n)]}


@pytest.mark.parametrize(("script", "error", "requests"), [
    ([(500, {"error": {"message": f"boom, key {KEY}"}})] * 3, ProviderUnavailable, 3),
    ([(429, {"error": "slow down"})] * 3, RateLimited, 3),
    ([(200, "{not json")] * 3, MalformedOutput, 3),
    ([(200, _listed(1))] * 3, MalformedOutput, 3),                 # one vector for two texts
    ([(200, {"data": [{"index": 0, "embedding": "nope"}, {"index": 1}]})] * 3, MalformedOutput, 3),
    ([(400, {"error": {"message": f"bad input {KEY}"}})], ProviderRejected, 1),
    ([(401, {"error": "who are you"})], ProviderRejected, 1),
], ids=["500", "429", "malformed-json", "wrong-count", "not-numbers", "400", "401"])
async def test_embedding_errors_are_mapped_retried_when_transient_and_never_show_the_key(
        script, error, requests, caplog):
    caplog.set_level(logging.DEBUG)
    async with ModelServer() as server:
        server.script.extend(script)
        providers = build(server)
        try:
            with pytest.raises(error) as raised:
                await providers.embedder.embed(["one", "two"], "SEMANTIC_SIMILARITY")
        finally:
            await providers.aclose()
    assert len(server.sent("/v1/embeddings")) == requests
    assert KEY not in str(raised.value) and KEY not in caplog.text
    assert all(KEY not in (r.error or "") for r in providers.ledger.records)
    assert len(providers.ledger.records) == requests and not any(r.ok for r in providers.ledger.records)


async def test_a_429_then_a_reply_succeeds_and_a_width_change_is_refused():
    async with ModelServer(dims=1024) as server:
        server.script.append((429, {"error": "busy"}))
        providers = build(server)
        try:
            assert (await providers.embedder.embed(["one"], "CLUSTERING")).shape == (1, 768)
            server.script.append((200, _listed(1, dims=768)))
            with pytest.raises(ProviderRejected, match=r"768-wide vectors after 1024-wide ones.*reindex --all"):
                await providers.embedder.embed(["two"], "CLUSTERING")
        finally:
            await providers.aclose()
    assert len(server.sent("/v1/embeddings")) == 3


def test_the_endpoint_embedder_needs_a_url_and_a_model_and_says_what_it_does():
    settings = ProvidersSettings.model_validate({"embeddings": {"provider": "openai_compat"}})
    with pytest.raises(ConfigError, match=r"providers.embeddings.base_url is not set"):
        build_providers(settings, Secrets(), None, None)
    settings = ProvidersSettings.model_validate({"embeddings": {"provider": "openai_compat"},
                                                 "llm": {"base_url": "http://u:pw-123456789@h:11434/v1"}})
    with pytest.raises(ConfigError, match=r"providers.embeddings.openai_model is not set"):
        build_providers(settings, Secrets(), None, None)
    settings = ProvidersSettings.model_validate({
        "embeddings": {"provider": "openai_compat", "openai_model": "nomic-embed-text"},
        "llm": {"base_url": "http://u:pw-123456789@h:11434/v1", "provider": "reflex"}})
    line = build_providers(settings, Secrets(), None, None).report[0]
    assert line == ("embeddings: openai_compat nomic-embed-text (embeddings from http://h:11434/v1; wider "
                    "vectors cut to 768 (Matryoshka), narrower zero-padded)")


@pytest.mark.parametrize("dialect", ["jina", "tei"])
async def test_rerank_both_dialects_send_their_shape_in_batches_and_score_in_the_order_given(dialect):
    passages = ["the dog is called biscuit", "weather today", "my dog biscuit likes walks", "tea"]
    async with ModelServer() as server:
        providers = build(server, rerank={"provider": "endpoint", "dialect": dialect, "base_url": server.url,
                                          "endpoint_model": "bge-reranker-v2-m3", "endpoint_batch_size": 3})
        try:
            scores = await providers.reranker.rerank("what is my dog called", passages)
        finally:
            await providers.aclose()
    assert scores == pytest.approx([0.6, 0.0, 0.4, 0.0])   # shares 3 and 2 of the 5 query words
    path = "/v1/rerank" if dialect == "jina" else "/rerank"
    sent = server.sent(path)
    assert len(server.seen) == len(sent) == 2
    field = "documents" if dialect == "jina" else "texts"
    assert [s.body[field] for s in sent] == [passages[:3], passages[3:]]
    assert {s.body["query"] for s in sent} == {"what is my dog called"}
    assert {s.headers["Authorization"] for s in sent} == {f"Bearer {KEY}"}
    if dialect == "jina":
        assert {s.body["model"] for s in sent} == {"bge-reranker-v2-m3"}
    else:
        assert "model" not in sent[0].body and sent[0].body["truncate"] is True
    assert not providers.reranker.skipped


async def test_rerank_logits_are_squashed_only_when_asked_and_bad_replies_are_errors():
    logits = {"results": [{"index": 1, "relevance_score": -2.0}, {"index": 0, "relevance_score": 3.5}]}
    async with ModelServer() as server:
        asked = build(server, rerank={"provider": "endpoint", "endpoint_model": "m", "endpoint_logits": True,
                                        "base_url": f"{server.url}/v1"})
        plain = build(server, rerank={"provider": "endpoint", "endpoint_model": "m", "base_url": server.url})
        try:
            server.script.append((200, logits))
            assert await asked.reranker.rerank("q", ["a", "b"]) == pytest.approx(
                [1 / (1 + np.exp(-3.5)), 1 / (1 + np.exp(2.0))])
            server.script.append((200, logits))
            with pytest.raises(ProviderRejected, match=r"outside \[0, 1\].*endpoint_logits: true"):
                await plain.reranker.rerank("q", ["a", "b"])
            server.script.extend([(200, {"results": [{"index": 0, "relevance_score": 0.5}]})] * 3)
            with pytest.raises(MalformedOutput, match=r"1 scores for 2 passages"):
                await plain.reranker.rerank("q", ["a", "b"])
            server.script.extend([(503, "down")] * 3)
            with pytest.raises(ProviderUnavailable):
                await plain.reranker.rerank("q", ["a", "b"])
        finally:
            await asked.aclose()
            await plain.aclose()


def test_the_jina_dialect_needs_a_model_name():
    settings = ProvidersSettings.model_validate({"rerank": {"provider": "endpoint", "base_url": "http://h:1"}})
    with pytest.raises(ConfigError, match=r"providers.rerank.endpoint_model is not set"):
        build_providers(settings, Secrets(), None, None)
    settings = ProvidersSettings.model_validate({"rerank": {"provider": "endpoint", "dialect": "tei",
                                                            "base_url": "http://h:1"}})
    assert build_providers(settings, Secrets(), None, None).report[1] == (
        "reranker: endpoint tei (tei dialect at http://h:1)")
