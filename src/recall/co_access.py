"""Hebbian co-access (plan §3.1): memories retrieved or injected together.

One row per unordered pair (a < b). Spreading activation reads partners from
either side, top-k per seed, in one batched statement per hop.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from src.db.sql import Executor

# A pair seen n times is associated with strength n / (n + 2): 1 → 0.33, 2 → 0.5,
# 8 → 0.8. Saturating, so one chance co-retrieval is weak and habits approach 1.
CO_ACCESS_HALF = 2.0


async def record_co_access(db: Executor, memory_ids: Sequence[int], at: datetime) -> int:
    """Strengthen every pair among `memory_ids`; return how many pairs were touched.

    Pairs are inserted in (a, b) order so concurrent writers lock them in the same
    order and cannot deadlock.
    """
    ids = sorted(set(memory_ids))
    if len(ids) < 2:
        return 0
    await db.execute(
        """INSERT INTO memory_co_access AS c (memory_id_a, memory_id_b, co_access_count, last_co_accessed)
           SELECT a, b, 1, $2 FROM unnest($1::bigint[]) a CROSS JOIN unnest($1::bigint[]) b
            WHERE a < b ORDER BY a, b
           ON CONFLICT (memory_id_a, memory_id_b) DO UPDATE
              SET co_access_count = c.co_access_count + 1,
                  last_co_accessed = GREATEST(c.last_co_accessed, EXCLUDED.last_co_accessed)""",
        ids, at,
    )
    return len(ids) * (len(ids) - 1) // 2


async def fetch_partners(db: Executor, seed_ids: Sequence[int], top_k: int = 3,
                         exclude: Sequence[int] = ()) -> list[tuple[int, int, float]]:
    """(seed, partner, strength in [0, 1]) for the top-k partners of every seed, one query."""
    if not seed_ids:
        return []
    rows = await db.fetch(
        """WITH seeds AS (SELECT DISTINCT unnest($1::bigint[]) AS seed),
                edges AS (
                    SELECT s.seed, c.memory_id_b AS partner, c.co_access_count AS n
                      FROM seeds s JOIN memory_co_access c ON c.memory_id_a = s.seed
                    UNION ALL
                    SELECT s.seed, c.memory_id_a, c.co_access_count
                      FROM seeds s JOIN memory_co_access c ON c.memory_id_b = s.seed),
                ranked AS (
                    SELECT seed, partner, n,
                           row_number() OVER (PARTITION BY seed ORDER BY n DESC, partner) AS rn
                      FROM edges WHERE partner <> ALL($3::bigint[]))
           SELECT seed, partner, n::float8 / (n + $4::float8) AS strength
             FROM ranked WHERE rn <= $2 ORDER BY seed, rn""",
        list(seed_ids), top_k, list(exclude), CO_ACCESS_HALF,
    )
    return [(r["seed"], r["partner"], r["strength"]) for r in rows]
