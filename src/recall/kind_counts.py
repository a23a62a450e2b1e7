"""Memories per type and source without scanning memories (sql/142).

Triggers on `memories` insert one contribution row per (memory_type, source_tag) for every
statement that adds, removes or retags memories; the truth for a pair is the sum of its
rows. The web overview ("memories by type") and the /memories form (its source list) read
the sums; the light ticker folds the rows into one per pair; the deep pass checks them
against `memories` and rebuilds them when a write bypassed the triggers (a restore,
triggers disabled). Fold and rebuild share one advisory lock, as the center summary's do
(src/weights/center_summary.py).
"""

from __future__ import annotations

import logging

import asyncpg

from src.db.sql import locked_transaction

log = logging.getLogger(__name__)

# pg_advisory_xact_lock key for fold and rebuild ("mkindcnt" in ASCII; sql/142's TRUNCATE trigger).
KIND_LOCK_KEY = 0x6D6B696E64636E74

# One statement, one snapshot: the rows it deletes are exactly the rows it sums; rows a
# concurrent writer adds meanwhile are not in the snapshot and stay as they are.
_FOLD = """
WITH gone AS (DELETE FROM memory_kind_counts RETURNING memory_type, source_tag, memories)
INSERT INTO memory_kind_counts (memory_type, source_tag, memories)
SELECT memory_type, source_tag, sum(memories) FROM gone GROUP BY 1, 2 HAVING sum(memories) <> 0"""

_FRESH = "SELECT memory_type, source_tag, count(*) AS memories FROM memories GROUP BY 1, 2"

_COMPARE = f"""
WITH kept AS (SELECT memory_type, source_tag, sum(memories) AS memories FROM memory_kind_counts GROUP BY 1, 2),
     fresh AS ({_FRESH})
SELECT COALESCE(k.memory_type, f.memory_type) AS memory_type, COALESCE(k.source_tag, f.source_tag) AS source_tag,
       COALESCE(k.memories, 0) AS kept, COALESCE(f.memories, 0) AS stored
  FROM kept k FULL JOIN fresh f ON (k.memory_type, k.source_tag) = (f.memory_type, f.source_tag)
 WHERE COALESCE(k.memories, 0) <> COALESCE(f.memories, 0)
 ORDER BY 1, 2"""


async def by_type(db: asyncpg.Connection | asyncpg.Pool) -> list[dict]:
    """[{memory_type, n}], most first; types with no memory left out."""
    rows = await db.fetch("""
        SELECT memory_type, sum(memories)::bigint AS n FROM memory_kind_counts
         GROUP BY memory_type HAVING sum(memories) > 0 ORDER BY n DESC, memory_type""")
    return [dict(r) for r in rows]


async def sources(db: asyncpg.Connection | asyncpg.Pool, limit: int) -> list[str]:
    """The `limit` source tags with the most memories, most first."""
    rows = await db.fetch("""
        SELECT source_tag FROM memory_kind_counts GROUP BY source_tag HAVING sum(memories) > 0
         ORDER BY sum(memories) DESC, source_tag LIMIT $1""", limit)
    return [r["source_tag"] for r in rows]


async def fold(db: asyncpg.Connection | asyncpg.Pool) -> None:
    """Fold the contribution rows into one per pair (each light tick), so the table stays
    at one row per (type, source) plus the writes since the last tick."""
    async with locked_transaction(db, KIND_LOCK_KEY) as conn:
        await conn.execute(_FOLD)


async def differences(db: asyncpg.Connection | asyncpg.Pool) -> list[dict]:
    """Pairs whose kept count differs from a fresh scan of memories (a full scan)."""
    return [dict(r) for r in await db.fetch(_COMPARE)]


async def rebuild(db: asyncpg.Connection | asyncpg.Pool) -> None:
    """Recount from memories (a full scan), replacing every row."""
    async with locked_transaction(db, KIND_LOCK_KEY) as conn:
        await conn.execute("DELETE FROM memory_kind_counts")
        await conn.execute(f"INSERT INTO memory_kind_counts (memory_type, source_tag, memories) {_FRESH}")


async def verify(db: asyncpg.Connection | asyncpg.Pool, *, repair: bool = True) -> list[dict]:
    """Compare the counts with memories, rebuild them when they differ; the differences found.
    Run by the deep pass, beside the center summary's check."""
    diffs = await differences(db)
    if diffs and repair:
        log.warning("memory kind counts differed from memories for %d pair(s) (%s); rebuilt them", len(diffs),
                    ", ".join(f"{d['memory_type']}/{d['source_tag']}: {d['kept']} kept vs {d['stored']} stored"
                              for d in diffs[:5]))
        await rebuild(db)
    return diffs
