"""Recall outcomes (plan §4.3, §4.5): what recall returned, and whether it was used after.

Mutation (`mutation.py`) writes one `recall_outcomes` row per returned memory with each
relevance component's contribution; consolidation's evolution step later scores the rows
whose window has passed (used = accessed again inside it) and prunes the old ones. The
table lives here, with the code that writes it, so recall never imports consolidation:
consolidation reads and scores it through these functions. (Not the §5.3 outcomes of
src/outcomes/: those are what the mind's decisions came to.)

Times are the caller's `now` (tests fix it).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from src.db.sql import Executor


async def insert_recall_outcomes(conn: Executor, at: datetime, memory_ids: Sequence[int],
                                 contributions: Sequence[Sequence[float]]) -> None:
    """What recall returned (rank = position) and each component's contribution."""
    if not memory_ids:
        return
    await conn.execute(
        """INSERT INTO recall_outcomes (at, memory_id, rank, contributions)
           SELECT $1, m, r, string_to_array(c, ',')::float8[]
             FROM unnest($2::bigint[], $3::int[], $4::text[]) AS t(m, r, c)""",
        at, list(memory_ids), list(range(1, len(memory_ids) + 1)),
        [",".join(repr(float(x)) for x in c) for c in contributions])


async def score_outcomes(conn: asyncpg.Connection, now: datetime, window_days: float,
                         limit: int) -> list[asyncpg.Record]:
    """Score recall outcomes whose window has passed: used = accessed again within it."""
    return await conn.fetch(
        """WITH due AS (
               SELECT id FROM recall_outcomes
                WHERE scored_at IS NULL AND at <= $1::timestamptz - make_interval(secs => $2::float8)
                ORDER BY at, id LIMIT $3 FOR UPDATE SKIP LOCKED)
           UPDATE recall_outcomes o
              SET scored_at = $1,
                  used = EXISTS (SELECT 1 FROM memories m, unnest(m.access_timestamps) AS t
                                  WHERE m.id = o.memory_id AND t > o.at
                                    AND t <= o.at + make_interval(secs => $2::float8))
             FROM due WHERE o.id = due.id
           RETURNING o.memory_id, o.used, o.contributions""",
        now, window_days * 86400.0, limit)


async def prune_outcomes(conn: Executor, now: datetime, keep_days: float) -> int:
    """Scored outcomes older than `keep_days` have done their work: delete them."""
    status = await conn.execute(
        "DELETE FROM recall_outcomes WHERE scored_at IS NOT NULL AND at < $1::timestamptz - make_interval(secs => $2::float8)",
        now, keep_days * 86400.0)
    return int(status.split()[-1])
