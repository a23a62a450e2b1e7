"""The memories' HNSW index: its state, and dropping / rebuilding it around a bulk import.

Inserting into a live HNSW index costs a graph search per row; building the index
once over all rows is cheaper past a cut-over that `import` measures against
(notes.md, "Operator CLI"). The definition here is sql/001's, kept in one place.

A crash between the drop and the rebuild leaves no index: search still works (the
vector arm becomes an exact scan) and the next `import` rebuilds it first. The service
says so at start-up and in /status, and rebuilds it in the background
(`rebuild_concurrently`: CREATE INDEX CONCURRENTLY on a connection of its own, so the
mind's writes never wait for the build; issue 41 item 8).
"""

from __future__ import annotations

import time
from typing import Literal

import asyncpg

from src.db.pool import SERVICE_APPLICATION

INDEX_NAME = "idx_memories_embedding"
CREATE_SQL = ("CREATE INDEX IF NOT EXISTS idx_memories_embedding ON memories "
              "USING hnsw (embedding halfvec_cosine_ops) WITH (m = 16, ef_construction = 128)")

_STATE = """
SELECT i.indisvalid
FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
WHERE c.relname = $1 AND c.relkind = 'i' AND pg_table_is_visible(c.oid)
"""

_SERVICE_CONNECTIONS = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid()
"""

IndexState = Literal["valid", "invalid", "missing"]


async def index_state(db: asyncpg.Pool | asyncpg.Connection) -> IndexState:
    """'valid', 'invalid' (a failed build left it unusable) or 'missing'."""
    valid = await db.fetchval(_STATE, INDEX_NAME)
    if valid is None:
        return "missing"
    return "valid" if valid else "invalid"


async def service_connections(db: asyncpg.Pool | asyncpg.Connection) -> int:
    """How many connections the running service holds to this database (0: not running)."""
    return await db.fetchval(_SERVICE_CONNECTIONS, SERVICE_APPLICATION)


async def drop_index(db: asyncpg.Pool | asyncpg.Connection) -> None:
    """Drop the HNSW index (bulk loading follows; `rebuild_index` puts it back)."""
    await db.execute("DROP INDEX IF EXISTS idx_memories_embedding")


CREATE_CONCURRENTLY_SQL = CREATE_SQL.replace("CREATE INDEX IF NOT EXISTS", "CREATE INDEX CONCURRENTLY IF NOT EXISTS")


async def rebuild_concurrently(dsn: str) -> float:
    """Build the HNSW index without blocking writes (a dedicated connection: CONCURRENTLY runs
    outside a transaction, and the build's memory setting dies with the connection); an
    invalid index is dropped first. The seconds it took."""
    conn = await asyncpg.connect(dsn)
    try:
        if await index_state(conn) == "invalid":
            await conn.execute("DROP INDEX CONCURRENTLY IF EXISTS idx_memories_embedding")
        await conn.execute("SELECT set_config('maintenance_work_mem', '512MB', false)")
        started = time.perf_counter()
        await conn.execute(CREATE_CONCURRENTLY_SQL)
        seconds = time.perf_counter() - started
        await conn.execute("ANALYZE memories")
        return seconds
    finally:
        await conn.close()


async def rebuild_index(pool: asyncpg.Pool, maintenance_work_mem: str = "1GB") -> float:
    """Build the HNSW index (replacing an invalid one); return the seconds it took.

    A larger maintenance_work_mem keeps the graph in memory while it is built
    (notes.md has the build times measured here).
    """
    async with pool.acquire() as conn:
        if await index_state(conn) == "invalid":
            await drop_index(conn)
        started = time.perf_counter()
        async with conn.transaction():
            # SET LOCAL: the pool's connection goes back without the setting
            await conn.execute("SELECT set_config('maintenance_work_mem', $1, true)", maintenance_work_mem)
            await conn.execute(CREATE_SQL)
        seconds = time.perf_counter() - started
        await conn.execute("ANALYZE memories")
    return seconds
