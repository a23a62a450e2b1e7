"""Switching the embed model to a local server's re-embeds the store through the existing
paths (plan §4.9): the start-up check's background worker and `python -m src.memory reindex`.
Real PostgreSQL; the fake is the model server only (tests/providers/model_server.py)."""

from __future__ import annotations

import random

import numpy as np
from pydantic import SecretStr

from src.providers.embedding import storage_text
from src.providers.factory import build_providers
from src.providers.settings import ProvidersSettings, Secrets
from src.recall.reembed import check_embed_model, count_stale
from src.recall.store import MemoryStore, NewMemory
from tests.fakes import HashEmbedder
from tests.memory_cli_helpers import cli
from tests.providers.fakes import Sleeps
from tests.providers.model_server import ModelServer, word_vector

TYPES = ["episodic", "semantic", "procedural", "preference", "reflection"]


def endpoint_providers(server: ModelServer, model: str):
    settings = ProvidersSettings.model_validate({
        "embeddings": {"provider": "openai_compat", "base_url": f"{server.url}/v1", "openai_model": model},
        "rerank": {"provider": "none"}, "llm": {"provider": "reflex"}})
    return build_providers(settings, Secrets(openai_api_key=SecretStr("sk-switch-0123456789")), None, "s1",
                           sleep=Sleeps(), rng=random.Random(1))


async def _seed(pool, n: int) -> list[NewMemory]:
    items = [NewMemory(f"memory {i} about topic {i % 7}", TYPES[i % 5]) for i in range(n)]
    await MemoryStore(pool, HashEmbedder(model_name="minilm-l6-v2-int8")).store_many(items)
    return items


async def test_the_start_up_check_re_embeds_a_store_of_another_model_with_the_endpoint(pool):
    items = await _seed(pool, 70)
    async with ModelServer(dims=1024) as server:
        providers = endpoint_providers(server, "mxbai-embed-large")
        try:
            stale, worker = await check_embed_model(pool, providers.embedder)
            assert stale == 70
            report = await worker.start()
        finally:
            await providers.aclose()
    assert (report.done, report.stopped) == (70, "complete")
    assert await count_stale(pool, "mxbai-embed-large") == 0
    sizes = [len(s.body["input"]) for s in server.sent("/v1/embeddings")]
    assert sizes == [32, 32, 6] and {s.body["model"] for s in server.seen} == {"mxbai-embed-large"}
    row = await pool.fetchrow("SELECT content, memory_type, embedding::text AS e FROM memories ORDER BY id LIMIT 1")
    stored = np.asarray([float(x) for x in row["e"].strip("[]").split(",")])
    expected = np.asarray(word_vector(storage_text(row["content"], row["memory_type"]), 1024)[:768])
    np.testing.assert_allclose(stored, expected / np.linalg.norm(expected), atol=2e-3)
    assert row["content"] == items[0].content


async def test_reindex_re_embeds_after_each_switch_between_endpoint_models(pool, db_dsn):
    await _seed(pool, 12)
    async with ModelServer(dims=1024) as first, ModelServer(dims=384) as second:
        for server, model in ((first, "mxbai-embed-large"), (second, "all-minilm")):
            providers = endpoint_providers(server, model)
            try:
                result = await cli(db_dsn, "reindex", embedder=providers.embedder)
            finally:
                await providers.aclose()
            assert result.code == 0, result.err
            assert f"re-embedded 12 memories with {model}" in result.out
            assert await count_stale(pool, model) == 0
            assert sum(len(s.body["input"]) for s in server.sent("/v1/embeddings")) == 12
    # the 384-wide model's rows are zero-padded, like MiniLM's
    assert await pool.fetchval(
        "SELECT count(*) FROM memories WHERE subvector(embedding, 385, 384)::text <> $1::text",
        "[" + ",".join(["0"] * 384) + "]") == 0
