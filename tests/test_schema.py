"""The schema's constraints, generated columns and indexes, on real PostgreSQL."""

from __future__ import annotations

import asyncpg
import numpy as np
import pytest
from pgvector import HalfVector


async def _insert(conn, **cols):
    cols.setdefault("content", "the user likes tea")
    names = ", ".join(cols)
    params = ", ".join(f"${i}" for i in range(1, len(cols) + 1))
    return await conn.fetchval(f"INSERT INTO memories ({names}) VALUES ({params}) RETURNING id", *cols.values())


async def test_defaults_are_the_plans(pool):
    async with pool.acquire() as conn:
        mid = await _insert(conn)
        row = await conn.fetchrow("SELECT * FROM memories WHERE id = $1", mid)
    assert (row["depth_weight_alpha"], row["depth_weight_beta"]) == (1.0, 4.0)
    assert row["memory_type"] == "episodic"
    assert row["source_tag"] == "external_user"
    assert row["source_confidence"] == 1.0
    assert row["immutable"] is False
    assert row["access_timestamps"] == []
    assert row["access_count"] == 0
    assert row["metadata"] == "{}"


@pytest.mark.parametrize(
    ("cols", "constraint"),
    [
        ({"memory_type": "dream"}, "memories_memory_type_known"),
        ({"depth_weight_alpha": 0.0}, "memories_alpha_positive"),
        ({"depth_weight_beta": -1.0}, "memories_beta_positive"),
        ({"content": "   "}, "memories_content_not_empty"),
        ({"content": ""}, "memories_content_not_empty"),
        ({"source_confidence": 1.5}, "memories_source_confidence_range"),
    ],
)
async def test_bad_rows_are_rejected(pool, cols, constraint):
    async with pool.acquire() as conn:
        with pytest.raises(asyncpg.CheckViolationError) as err:
            await _insert(conn, **cols)
    assert err.value.constraint_name == constraint


async def test_null_content_rejected(pool):
    async with pool.acquire() as conn:
        with pytest.raises(asyncpg.NotNullViolationError):
            await _insert(conn, content=None)


async def test_content_tsv_holds_the_memory_at_weight_a_and_its_contexts_at_weight_d(pool):
    """sql/150: the memory's own words are weight A; its conversation context and a model's
    §4.6 preamble are added at weight D, never instead of the memory's words."""
    async with pool.acquire() as conn:
        mid = await _insert(conn, content="Running marathons in Berlin")
        assert await conn.fetchval("SELECT content_tsv::text FROM memories WHERE id=$1", mid) == \
            "'berlin':4A 'marathon':2A 'run':1A"
        await conn.execute("UPDATE memories SET content_contextualized = 'Kyoto gardens' WHERE id=$1", mid)
        assert await conn.fetchval("SELECT content_tsv::text FROM memories WHERE id=$1", mid) == \
            "'berlin':4A 'garden':6 'kyoto':5 'marathon':2A 'run':1A"
        await conn.execute("UPDATE memories SET conversation_context = 'Mel: any races lately?' WHERE id=$1", mid)
        assert await conn.fetchval("SELECT content_tsv::text FROM memories WHERE id=$1", mid) == \
            "'berlin':4A 'garden':10 'kyoto':9 'late':8 'marathon':2A 'mel':5 'race':7 'run':1A"


async def test_megabyte_content_is_storable(pool):
    big = ("word" + " ") * 260_000  # ~1.3 MB
    async with pool.acquire() as conn:
        mid = await _insert(conn, content=big)
        assert await conn.fetchval("SELECT length(content) FROM memories WHERE id=$1", mid) == len(big)


async def test_co_access_pairs_are_ordered(pool):
    async with pool.acquire() as conn:
        a = await _insert(conn, content="a memory")
        b = await _insert(conn, content="b memory")
        await conn.execute("INSERT INTO memory_co_access (memory_id_a, memory_id_b) VALUES ($1, $2)", a, b)
        with pytest.raises(asyncpg.CheckViolationError) as err:
            await conn.execute("INSERT INTO memory_co_access (memory_id_a, memory_id_b) VALUES ($1, $2)", b, a)
    assert err.value.constraint_name == "memory_co_access_ordered"


async def test_manifest_has_one_row_at_most(pool):
    async with pool.acquire() as conn:
        await conn.execute("INSERT INTO agent_manifest DEFAULT VALUES")
        with pytest.raises(asyncpg.CheckViolationError):
            await conn.execute("INSERT INTO agent_manifest (id) VALUES (2)")


async def test_halfvec_roundtrip_and_cosine_order_uses_hnsw(pool):
    rng = np.random.default_rng(7)
    vecs = rng.standard_normal((300, 768)).astype(np.float32)
    async with pool.acquire() as conn:
        await conn.executemany(
            "INSERT INTO memories (content, embedding, embed_model) VALUES ($1, $2, 'test')",
            [(f"memory {i}", HalfVector(v)) for i, v in enumerate(vecs)],
        )
        await conn.execute("ANALYZE memories")
        back = await conn.fetchval("SELECT embedding FROM memories WHERE content = 'memory 5'")
        np.testing.assert_allclose(back.to_numpy(), vecs[5], rtol=1e-2, atol=1e-2)
        query = HalfVector(vecs[5])
        # Small tables tempt the planner into a seq scan; the question is whether the index serves the ORDER BY.
        await conn.execute("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in await conn.fetch(
            "EXPLAIN SELECT id FROM memories ORDER BY embedding <=> $1 LIMIT 10", query))
        assert "idx_memories_embedding" in plan
        top = await conn.fetchval("SELECT content FROM memories ORDER BY embedding <=> $1 LIMIT 1", query)
        assert top == "memory 5"
        assert await conn.fetchval("SHOW hnsw.iterative_scan") == "relaxed_order"
