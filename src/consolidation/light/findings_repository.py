"""The SQL of the light ticker's findings (plan §4.1): `consolidation_findings`.

Contradicting pairs and emerging themes are recorded once each (by fingerprint); the
deep pass reads the themes, and its reconsolidation phase consumes the contradictions
(`open_contradictions`, `consume`: sql/157, issue 40 item 3). Also the reads of `memories` the scans that make them run:
the recently used, each one's nearest neighbour, the newest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import asyncpg

from src.db.sql import Executor

# memory_standing's last_seen (sql/141) is last use or creation: one index walk, newest first
RECENTLY_USED = """
SELECT s.id FROM memory_standing s JOIN memories m ON m.id = s.id
 WHERE s.last_seen >= $1 AND m.embed_model = $2
 ORDER BY s.last_seen DESC LIMIT $3"""


async def recently_used(conn: Executor, since: datetime, embed_model: str, limit: int) -> list[int]:
    """Ids of memories retrieved or written since `since` (the light scan's population)."""
    rows = await conn.fetch(RECENTLY_USED, since, embed_model, limit)
    return sorted(r["id"] for r in rows)


async def nearest_pairs(conn: Executor, ids: Sequence[int], embed_model: str,
                        min_similarity: float) -> list[asyncpg.Record]:
    """Each memory with its nearest neighbour of the same model, above `min_similarity`."""
    return await conn.fetch(
        """SELECT m.id AS a_id, m.content AS a_content, m.embedding AS a_vec,
                  n.id AS b_id, n.content AS b_content, n.embedding AS b_vec, n.sim
             FROM memories m
             CROSS JOIN LATERAL (
                 SELECT o.id, o.content, o.embedding, 1 - (o.embedding <=> m.embedding) AS sim
                   FROM memories o
                  WHERE o.embed_model = $2 AND o.id <> m.id AND o.embedding IS NOT NULL
                  ORDER BY o.embedding <=> m.embedding LIMIT 1) n
            WHERE m.id = ANY($1::bigint[]) AND m.embedding IS NOT NULL AND n.sim >= $3
            ORDER BY m.id""", list(ids), embed_model, min_similarity)


async def recent_memories(conn: Executor, limit: int, *, with_vectors: bool = False,
                          embed_model: str | None = None) -> list[asyncpg.Record]:
    """The newest memories (insights, narratives and tensions are the pass's own: left out)."""
    return await conn.fetch(
        """SELECT id, content, memory_type, created_at, compressed, source_tag, metadata,
                  CASE WHEN $2 THEN embedding END AS embedding
             FROM memories
            WHERE memory_type NOT IN ('tension', 'narrative')
              AND NOT (memory_type = 'reflection' AND metadata->>'kind' = 'insight')
              AND ($3::text IS NULL OR (embed_model = $3 AND embedding IS NOT NULL))
            ORDER BY created_at DESC, id DESC LIMIT $1""", limit, with_vectors, embed_model)


async def insert_finding(conn: Executor, kind: str, fingerprint: str, memory_ids: Sequence[int],
                         details: Mapping[str, Any]) -> bool:
    """Record a finding once; False when the same finding was recorded before."""
    got = await conn.fetchval(
        """INSERT INTO consolidation_findings (kind, fingerprint, memory_ids, details)
           VALUES ($1, $2, $3, $4::jsonb) ON CONFLICT (kind, fingerprint) DO NOTHING RETURNING id""",
        kind, fingerprint, list(memory_ids), json.dumps(dict(details), default=str))
    return got is not None


async def recent_themes(conn: Executor, limit: int) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT memory_ids, details FROM consolidation_findings WHERE kind = 'theme' "
        "ORDER BY at DESC LIMIT $1", limit)


async def open_contradictions(conn: Executor, limit: int) -> list[asyncpg.Record]:
    """Contradiction findings no deep pass has consumed yet, oldest first, with both memories'
    texts, the older memory first (None when a memory is gone)."""
    return await conn.fetch(
        """SELECT f.id, f.memory_ids, f.details, a.id AS older_id, a.content AS older_content,
                  b.id AS newer_id, b.content AS newer_content
             FROM consolidation_findings f
             LEFT JOIN LATERAL (SELECT m.id, m.content FROM memories m WHERE m.id = ANY(f.memory_ids)
                                 ORDER BY m.created_at, m.id LIMIT 1) a ON true
             LEFT JOIN LATERAL (SELECT m.id, m.content FROM memories m WHERE m.id = ANY(f.memory_ids)
                                 ORDER BY m.created_at DESC, m.id DESC LIMIT 1) b ON true
            WHERE f.kind = 'contradiction' AND f.consumed_at IS NULL
            ORDER BY f.id LIMIT $1""", limit)


async def consume(conn: Executor, finding_id: int, pass_id: int | None, at: datetime, outcome: str) -> None:
    """Mark a finding consumed (in the transaction of what was written from it)."""
    await conn.execute(
        """UPDATE consolidation_findings SET consumed_at = $3, consumed_pass = $2, outcome = $4
            WHERE id = $1 AND consumed_at IS NULL""", finding_id, pass_id, at, outcome)
