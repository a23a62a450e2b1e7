"""The SQL of reconsolidation's conflicts (plan §4.4): `productive_contradictions`.

New memories are screened against the most similar live insight; a pair the model
judged a productive contradiction is kept side by side and never offered again.

Every statement is set-based with bound parameters. Times written here are the
caller's `now` (tests fix it); rows the weight choke point writes carry `now` in
their evidence (`evidence->>'at'`), which is what the "already done since …" rules
compare against, so a test with a fixed clock sees its own history.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

from src.db.sql import Executor


async def conflicting_insights(db: Executor, now: datetime, *, lookback_days: float, similarity: float,
                               embed_model: str, max_new: int, limit: int,
                               since: datetime | None = None) -> list[asyncpg.Record]:
    """Recent non-insight memories and the most similar live insight above `similarity`.

    Boundaries and seeds are not new evidence against an insight (integrity.is_seed).

    An insight is a `reflection` that supersedes sources; a pair already judged a
    productive contradiction, or an insight already superseded, is not offered again.

    A memory a newer statement updated (`memory_supersedes` via 'update', sql/153) is no
    new information: it held until then, and rewriting an insight to agree with it would
    state the earlier fact as current (issue 37 item 5). Its successor is screened instead.
    """
    return await db.fetch(
        """WITH fresh AS (
               SELECT m.id, m.content, m.embedding FROM memories m
                WHERE m.created_at > GREATEST($1::timestamptz - make_interval(secs => $2::float8), $7::timestamptz)
                  AND m.created_at <= $1
                  AND m.embedding IS NOT NULL AND m.embed_model = $4 AND m.memory_type <> 'reflection'
                  AND NOT m.immutable AND m.source_tag <> 'bootstrap_seed'
                  AND NOT EXISTS (SELECT 1 FROM memory_supersedes u WHERE u.source_id = m.id AND u.via IN ('update', 'correction'))
                ORDER BY m.created_at DESC LIMIT $5)
           SELECT f.id AS memory_id, f.content AS memory_content, f.embedding AS memory_embedding,
                  i.id AS insight_id, i.content AS insight_content, i.embedding AS insight_embedding,
                  i.similarity
             FROM fresh f
             CROSS JOIN LATERAL (
                 SELECT ins.id, ins.content, ins.embedding, 1 - (ins.embedding <=> f.embedding) AS similarity
                   FROM memories ins
                  WHERE ins.memory_type = 'reflection' AND ins.embed_model = $4 AND ins.id <> f.id
                    AND NOT (ins.metadata ? 'superseded_by')
                    -- derived from sources: an update link makes no insight
                    AND EXISTS (SELECT 1 FROM memory_supersedes s WHERE s.insight_id = ins.id AND s.via NOT IN ('update', 'correction'))
                    AND NOT EXISTS (SELECT 1 FROM memory_supersedes s
                                     WHERE s.insight_id = ins.id AND s.source_id = f.id)
                  ORDER BY ins.embedding <=> f.embedding LIMIT 1) AS i
            WHERE i.similarity >= $3
              AND NOT EXISTS (SELECT 1 FROM productive_contradictions p
                               WHERE p.insight_id = i.id AND p.memory_id = f.id)
            ORDER BY i.similarity DESC LIMIT $6""",
        now, lookback_days * 86400.0, similarity, embed_model, max_new, limit, since)


async def record_productive_contradiction(conn: Executor, insight_id: int, memory_id: int, at: datetime,
                                          explanation: str) -> None:
    await conn.execute(
        """INSERT INTO productive_contradictions (insight_id, memory_id, at, explanation)
           VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING""", insight_id, memory_id, at, explanation)
