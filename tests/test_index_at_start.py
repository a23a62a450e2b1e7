"""Issue 41 item 8: a missing vector index (an import killed during its rebuild) is said at
start-up and in /status, and rebuilt in the background without holding the mind's writes."""

from __future__ import annotations

import asyncpg

from src.recall.hnsw import index_state
from tests.proc import agent_env, run_agent


async def test_a_missing_index_is_said_and_rebuilt(db_dsn):
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute("DROP INDEX idx_memories_embedding")
        assert await index_state(conn) == "missing"
    finally:
        await conn.close()
    result = run_agent(b"My sister lives in Porto.\n/status\n/quit\n", agent_env(DATABASE_URL=db_dsn), timeout=120)
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    assert "the vector index is missing; rebuilding it in the background" in result.stderr.decode()   # start-up
    assert "vector index: " in out
    conn = await asyncpg.connect(db_dsn)
    try:
        assert await index_state(conn) == "valid"
    finally:
        await conn.close()


async def test_a_valid_index_is_not_mentioned_at_start(db_dsn):
    result = run_agent(b"/status\n/quit\n", agent_env(DATABASE_URL=db_dsn), timeout=120)
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    assert "rebuilding it in the background" not in out and "vector index: valid" in out
