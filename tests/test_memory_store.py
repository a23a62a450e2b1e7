"""MemoryStore against a real PostgreSQL: what one row looks like, the bulk path, failures."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import pytest

from src.errors import InputRejected, ProviderUnavailable
from src.recall.search import search_hybrid
from src.recall.store import EMBED_MAX_CHARS, MemoryStore, NewMemory
from tests.fakes import HashEmbedder


@dataclass
class FailingEmbedder(HashEmbedder):
    """A HashEmbedder whose calls fail from call number `fail_from` (0-based) on."""

    fail_from: int = 0

    async def embed(self, texts, task_type, titles=None):
        if len(self.calls) >= self.fail_from:
            self.calls.append(None)
            raise ProviderUnavailable("embedding service down (503)", provider="fake")
        return await super().embed(texts, task_type, titles)


@dataclass
class WrongShapeEmbedder(HashEmbedder):
    async def embed(self, texts, task_type, titles=None):
        return (await super().embed(texts, task_type, titles))[:, :256]


async def _row(pool, memory_id):
    return await pool.fetchrow("SELECT * FROM memories WHERE id = $1", memory_id)


async def test_store_writes_every_field_and_embeds_with_prefix_and_title(pool):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    when = datetime(2025, 3, 1, 12, 30, tzinfo=UTC)
    memory_id = await store.store(NewMemory(
        "Water boils at 100 degrees Celsius at sea level", "semantic",
        source_tag="consolidation", source_confidence=0.75, event_time=when,
        compressed="water boils at 100C", immutable=True, alpha=2.5, beta=1.5,
        metadata={"topic": "physics", "n": 3},
    ))
    row = await _row(pool, memory_id)
    assert row["content"] == "Water boils at 100 degrees Celsius at sea level"
    assert row["memory_type"] == "semantic"
    assert row["embed_model"] == "fake-hash-768"
    assert row["source_tag"] == "consolidation"
    assert row["source_confidence"] == 0.75
    assert row["event_time"] == when
    assert row["compressed"] == "water boils at 100C"
    assert row["immutable"] is True
    assert (row["depth_weight_alpha"], row["depth_weight_beta"]) == (2.5, 1.5)
    assert json.loads(row["metadata"]) == {"topic": "physics", "n": 3}
    assert row["access_count"] == 0 and row["access_timestamps"] == []

    assert len(embedder.calls) == 1
    call = embedder.calls[0]
    assert call.texts == ["Factual knowledge: Water boils at 100 degrees Celsius at sea level"]
    assert call.task_type == "RETRIEVAL_DOCUMENT"
    assert call.titles == ["semantic"]
    expected = await HashEmbedder().embed(call.texts, "RETRIEVAL_DOCUMENT", ["semantic"])
    stored = row["embedding"].to_numpy().astype(np.float32)
    np.testing.assert_allclose(stored, expected[0], atol=1e-3)  # halfvec precision


async def test_store_defaults_are_a_blank_slate_episodic_memory(pool):
    memory_id = await MemoryStore(pool, HashEmbedder()).store(NewMemory("met Ana at the station"))
    row = await _row(pool, memory_id)
    assert (row["memory_type"], row["source_tag"], row["source_confidence"]) == (
        "episodic", "external_user", 1.0)
    assert (row["depth_weight_alpha"], row["depth_weight_beta"], row["immutable"]) == (1.0, 4.0, False)
    assert row["event_time"] is None and row["compressed"] is None
    assert json.loads(row["metadata"]) == {}


async def test_nul_bytes_and_invalid_utf8_are_cleaned_before_insert(pool):
    store = MemoryStore(pool, HashEmbedder())
    first = await store.store(NewMemory("nul\x00 inside\x00 text"))
    second = await store.store(NewMemory(b"bad \xff byte and \x00nul"))
    assert (await _row(pool, first))["content"] == "nul inside text"
    assert (await _row(pool, second))["content"] == "bad \ufffd byte and nul"


@pytest.mark.parametrize("content", ["", "   \n", "\x00\x00", b"\x00 \n"])
async def test_empty_content_is_rejected_and_nothing_stored(pool, content):
    embedder = HashEmbedder()
    with pytest.raises(InputRejected) as info:
        await MemoryStore(pool, embedder).store(NewMemory(content))
    assert str(info.value) == ("memory: the memory content is empty (after removing NUL bytes "
                               "and whitespace); nothing was stored")
    assert await pool.fetchval("SELECT count(*) FROM memories") == 0
    assert embedder.calls == []


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"memory_type": "insight"},
     "memory: unknown memory type 'insight'; expected one of: episodic, semantic, procedural, "
     "preference, reflection, correction, narrative, tension"),
    ({"source_confidence": 1.5}, "memory: source_confidence must be in [0, 1], got 1.5"),
    ({"alpha": 0.0}, "memory: alpha must be a finite number > 0, got 0.0"),
    ({"beta": float("nan")}, "memory: beta must be a finite number > 0, got nan"),
    ({"metadata": {"when": datetime(2025, 1, 1)}},
     "memory: metadata is not JSON-serialisable: Object of type datetime is not JSON serializable"),
])
async def test_invalid_fields_are_rejected_with_a_message(pool, kwargs, message):
    with pytest.raises(InputRejected) as info:
        await MemoryStore(pool, HashEmbedder()).store(NewMemory("some content", **kwargs))
    assert str(info.value) == message
    assert await pool.fetchval("SELECT count(*) FROM memories") == 0


async def test_megabyte_content_is_stored_whole_embedded_by_its_head_and_searchable(pool):
    embedder = HashEmbedder()
    content = "quasar " + "lorem ipsum dolor sit amet " * 38_000
    assert len(content) > 1_000_000
    memory_id = await MemoryStore(pool, embedder).store(NewMemory(content))
    row = await _row(pool, memory_id)
    assert row["content"] == content
    assert embedder.calls[0].texts == ["Personal experience memory: " + content[:EMBED_MAX_CHARS]]
    hits = await search_hybrid(pool, "quasar", None, embed_model=embedder.model_name)
    assert [h.id for h in hits] == [memory_id]
    assert hits[0].content == content


async def test_embedder_failure_still_stores_the_memory_unembedded(pool, caplog):
    embedder = FailingEmbedder()
    with caplog.at_level(logging.WARNING, logger="src.recall.store"):
        memory_id = await MemoryStore(pool, embedder).store(NewMemory("the zeppelin landed at noon"))
    row = await _row(pool, memory_id)
    assert row["content"] == "the zeppelin landed at noon"
    assert row["embedding"] is None and row["embed_model"] is None
    assert caplog.messages == [
        "storing a new episodic memory without an embedding (the re-embed worker will add it): "
        "embedding service down (503)"]
    # keyword search still finds it; the vector arm cannot
    hits = await search_hybrid(pool, "zeppelin", np.ones(768, dtype=np.float32),
                               embed_model=embedder.model_name)
    assert [(h.id, h.vec_rank, h.fts_rank, h.embedding) for h in hits] == [(memory_id, None, 1, None)]


async def test_embedder_returning_the_wrong_width_stores_unembedded(pool):
    memory_id = await MemoryStore(pool, WrongShapeEmbedder()).store(NewMemory("narrow vectors"))
    row = await _row(pool, memory_id)
    assert row["embedding"] is None and row["embed_model"] is None


async def test_store_many_returns_ids_in_input_order_and_embeds_in_batches_of_100(pool):
    embedder = HashEmbedder()
    store = MemoryStore(pool, embedder)
    await store.store(NewMemory("one row before, so ids do not start at 1"))
    types = ["episodic", "semantic", "procedural", "preference"]
    items = [NewMemory(f"memory number {i} about topic {i % 7}", types[i % 4],
                       source_tag="import", metadata={"i": i})
             for i in range(250)]
    ids = await store.store_many(items)

    assert len(ids) == 250 and len(set(ids)) == 250
    rows = await pool.fetch("SELECT id, content, memory_type, embed_model, source_tag, metadata, "
                            "embedding IS NOT NULL AS has_vec FROM memories WHERE id = ANY($1)", ids)
    by_id = {r["id"]: r for r in rows}
    for i, memory_id in enumerate(ids):
        r = by_id[memory_id]
        assert (r["content"], r["memory_type"], r["source_tag"]) == (
            f"memory number {i} about topic {i % 7}", types[i % 4], "import")
        assert json.loads(r["metadata"]) == {"i": i}
        assert r["embed_model"] == "fake-hash-768" and r["has_vec"]
    bulk_calls = embedder.calls[1:]
    assert [len(c.texts) for c in bulk_calls] == [100, 100, 50]
    assert all(c.task_type == "RETRIEVAL_DOCUMENT" for c in bulk_calls)
    assert bulk_calls[2].texts[0] == "Personal experience memory: memory number 200 about topic 4"
    assert bulk_calls[2].titles[:2] == ["episodic", "semantic"]
    # the stored vector is the one computed for that very item
    vec = (await pool.fetchval("SELECT embedding FROM memories WHERE id = $1", ids[201])).to_numpy()
    expected = await HashEmbedder().embed([bulk_calls[2].texts[1]], "RETRIEVAL_DOCUMENT", ["semantic"])
    np.testing.assert_allclose(vec.astype(np.float32), expected[0], atol=1e-3)
    # the identity sequence keeps working after the reserved ids
    after = await store.store(NewMemory("one row after"))
    assert after > max(ids)


async def test_store_many_after_an_embed_failure_writes_the_rest_unembedded(pool, caplog):
    embedder = FailingEmbedder(fail_from=1)
    items = [NewMemory(f"bulk memory {i}") for i in range(230)]
    with caplog.at_level(logging.WARNING, logger="src.recall.store"):
        ids = await MemoryStore(pool, embedder).store_many(items)
    assert len(embedder.calls) == 2  # the third chunk is not tried
    rows = await pool.fetch("SELECT id, embed_model, embedding IS NULL AS no_vec FROM memories "
                            "ORDER BY id")
    assert [r["id"] for r in rows] == ids
    assert [r["embed_model"] for r in rows] == ["fake-hash-768"] * 100 + [None] * 130
    assert [r["no_vec"] for r in rows] == [False] * 100 + [True] * 130
    assert caplog.messages == [
        "embedding failed at item 100 of 230; storing items 100..229 without embeddings "
        "(the re-embed worker will add them): embedding service down (503)"]


async def test_store_many_rejects_the_whole_batch_for_one_bad_item(pool):
    embedder = HashEmbedder()
    items = [NewMemory("fine"), NewMemory("also fine"), NewMemory("\x00 "), NewMemory("fine too")]
    with pytest.raises(InputRejected) as info:
        await MemoryStore(pool, embedder).store_many(items)
    assert str(info.value).startswith("item 2: the memory content is empty")
    assert await pool.fetchval("SELECT count(*) FROM memories") == 0
    assert embedder.calls == []


async def test_store_many_of_nothing_does_nothing(pool):
    embedder = HashEmbedder()
    assert await MemoryStore(pool, embedder).store_many([]) == []
    assert embedder.calls == []


async def test_store_many_keeps_every_field(pool):
    when = datetime(2024, 6, 1, tzinfo=UTC)
    item = NewMemory(b"caf\xc3\xa9 \x00visit", "preference", source_tag="dmn",
                     source_confidence=0.4, event_time=when, compressed=" likes caf\u00e9 ",
                     immutable=True, alpha=3.0, beta=2.0, metadata={"k": ["v"]})
    [memory_id] = await MemoryStore(pool, HashEmbedder()).store_many([item])
    row = await _row(pool, memory_id)
    assert (row["content"], row["memory_type"], row["source_tag"], row["source_confidence"],
            row["event_time"], row["compressed"], row["immutable"], row["depth_weight_alpha"],
            row["depth_weight_beta"], json.loads(row["metadata"])) == (
        "café visit", "preference", "dmn", 0.4, when, "likes café", True, 3.0, 2.0, {"k": ["v"]})
    assert row["created_at"] is not None and row["content_tsv"] is not None


async def test_metadata_strings_lose_nul_and_lone_surrogates_only(pool):
    memory_id = await MemoryStore(pool, HashEmbedder()).store(NewMemory(
        "with odd metadata", metadata={"a\x00b": ["x\x00y", "bad \ud800 half", "line\n"], "n": 1.5}))
    assert json.loads((await _row(pool, memory_id))["metadata"]) == {
        "ab": ["xy", "bad ? half", "line\n"], "n": 1.5}
