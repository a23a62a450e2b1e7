"""Per-session settings hold on every use of every pooled connection (issue 11, Deliver 9).

A plain SET in the pool's init was lost when asyncpg reset a connection coming back to
the pool (RESET ALL), so the second use of a connection had iterative HNSW scans off
again (the vector arm came back short). The settings now ride in the start-up packet,
the session's defaults: a RESET ALL, which the pool no longer sends (src/db/pool.py
keep_session) but a caller or a server-side reset might, keeps them."""

from __future__ import annotations

from src.db.pool import create_pool


async def test_iterative_scan_holds_on_every_use_and_survives_reset_all(db_dsn):
    pool = await create_pool(db_dsn, min_size=1, max_size=1)
    try:
        seen = []
        for _ in range(4):
            async with pool.acquire() as conn:
                seen.append((await conn.fetchval("SELECT pg_backend_pid()"),
                             await conn.fetchval("SHOW hnsw.iterative_scan")))
        assert len({pid for pid, _ in seen}) == 1                   # the same connection every time
        assert [value for _, value in seen] == ["relaxed_order"] * 4
        # the pool's own shorthand methods acquire and release too
        assert [await pool.fetchval("SHOW hnsw.iterative_scan") for _ in range(3)] == ["relaxed_order"] * 3
        async with pool.acquire() as conn:
            await conn.execute("SET hnsw.iterative_scan = off")
            await conn.execute("RESET ALL")                          # back to the session default: ours
            assert await conn.fetchval("SHOW hnsw.iterative_scan") == "relaxed_order"
    finally:
        await pool.close()
