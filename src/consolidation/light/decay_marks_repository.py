"""The SQL of the light decay nudge (plan §4.1): `memory_decay_marks`.

A side table, not a column of `memories`, so marking a memory decayed costs no
non-HOT update of the memory row. The nudge itself goes through the weight choke point;
`centers` are the weights it starts from (Phase B's per-cycle baseline).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from src.db.sql import Executor


async def decay_candidates(conn: Executor, now: datetime, unused_before: datetime,
                           decayed_before: datetime, limit: int) -> list[int]:
    """Unused memories due for their decay nudge, longest unused first."""
    rows = await conn.fetch(
        """SELECT m.id FROM memories m
             LEFT JOIN memory_decay_marks d ON d.memory_id = m.id
            WHERE NOT m.immutable
              AND COALESCE(m.last_accessed, m.created_at) < $1
              AND (d.decayed_at IS NULL OR d.decayed_at < $2)
            ORDER BY COALESCE(m.last_accessed, m.created_at), m.id
            LIMIT $3""", unused_before, decayed_before, limit)
    return [r["id"] for r in rows]


async def mark_decayed(conn: Executor, ids: Sequence[int], at: datetime) -> None:
    await conn.execute(
        """INSERT INTO memory_decay_marks (memory_id, decayed_at) SELECT unnest($1::bigint[]), $2
           ON CONFLICT (memory_id) DO UPDATE SET decayed_at = EXCLUDED.decayed_at""", list(ids), at)


async def centers(conn: Executor, ids: Sequence[int]) -> dict[int, float]:
    rows = await conn.fetch(
        """SELECT id, depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) AS c
             FROM memories WHERE id = ANY($1::bigint[])""", list(ids))
    return {r["id"]: r["c"] for r in rows}
