"""Per-session settings hold on every use of every pooled connection (issue 11, Deliver 9).

asyncpg runs RESET ALL when a connection goes back to the pool; a plain SET in the
pool's init was lost there, so the second use of a connection had iterative HNSW
scans off again (the vector arm came back short)."""

from __future__ import annotations

from src.db.pool import create_pool


async def test_iterative_scan_survives_release_and_reacquire(db_dsn):
    pool = await create_pool(db_dsn, min_size=1, max_size=1)
    try:
        seen = []
        for _ in range(4):
            async with pool.acquire() as conn:
                seen.append((await conn.fetchval("SELECT pg_backend_pid()"),
                             await conn.fetchval("SHOW hnsw.iterative_scan")))
                await conn.execute("SET hnsw.iterative_scan = off")   # a caller's own change ...
        pids = {pid for pid, _ in seen}
        assert len(pids) == 1                                     # the same connection every time
        assert [value for _, value in seen] == ["relaxed_order"] * 4   # ... is reset to ours
        # the pool's own shorthand methods acquire and release too
        assert [await pool.fetchval("SHOW hnsw.iterative_scan") for _ in range(3)] == ["relaxed_order"] * 3
    finally:
        await pool.close()
