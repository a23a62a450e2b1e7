"""The SQL of reconsolidation, temporal replay and contextual retrieval (plan §4.4, §4.6).

Every statement is set-based with bound parameters. Times written here are the
caller's `now` (tests fix it); rows the weight choke point writes carry `now` in
their evidence (`evidence->>'at'`), which is what the "already done since …" rules
compare against, so a test with a fixed clock sees its own history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np
from pgvector import HalfVector

from src.db.sql import Executor, json_param


# --------------------------------------------------------------------------- reconsolidation
async def previous_pass_start(db: Executor, pass_id: int) -> datetime | None:
    """When the last finished deep pass before `pass_id` began (None: there is none)."""
    return await db.fetchval(
        "SELECT max(started_at) FROM consolidation_passes WHERE id < $1 AND status = 'done'", pass_id)


async def conflicting_insights(db: Executor, now: datetime, *, lookback_days: float, similarity: float,
                               embed_model: str, max_new: int, limit: int,
                               since: datetime | None = None) -> list[asyncpg.Record]:
    """Recent non-insight memories and the most similar live insight above `similarity`.

    An insight is a `reflection` that supersedes sources; a pair already judged a
    productive contradiction, or an insight already superseded, is not offered again.
    """
    return await db.fetch(
        """WITH fresh AS (
               SELECT m.id, m.content, m.embedding FROM memories m
                WHERE m.created_at > GREATEST($1::timestamptz - make_interval(secs => $2::float8), $7::timestamptz)
                  AND m.created_at <= $1
                  AND m.embedding IS NOT NULL AND m.embed_model = $4 AND m.memory_type <> 'reflection'
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
                    AND EXISTS (SELECT 1 FROM memory_supersedes s WHERE s.insight_id = ins.id)
                    AND NOT EXISTS (SELECT 1 FROM memory_supersedes s
                                     WHERE s.insight_id = ins.id AND s.source_id = f.id)
                  ORDER BY ins.embedding <=> f.embedding LIMIT 1) AS i
            WHERE i.similarity >= $3
              AND NOT EXISTS (SELECT 1 FROM productive_contradictions p
                               WHERE p.insight_id = i.id AND p.memory_id = f.id)
            ORDER BY i.similarity DESC LIMIT $6""",
        now, lookback_days * 86400.0, similarity, embed_model, max_new, limit, since)


#: Weight changes that mean a source changed: faded, demoted, superseded or promoted. Not
#: retrieval, the gate, the light ticker's small decay, nor the give-way of sources when an
#: insight is formed (actor 'consolidation'): those are the insight's normal life.
SOURCE_CHANGE_ACTORS = ("decay", "demotion", "reconsolidation", "promotion")


async def insights_with_changed_sources(db: Executor, limit: int) -> list[asyncpg.Record]:
    """Live insights a source of which changed since the insight was last evaluated.

    A source changed when one of SOURCE_CHANGE_ACTORS wrote a weight change for it, or
    it was itself superseded (by another insight than this one) since the evaluation.
    """
    return await db.fetch(
        """SELECT i.id, i.content,
                  array_agg(src.id ORDER BY src.id) AS source_ids,
                  array_agg(left(src.content, 400) ORDER BY src.id) AS source_contents,
                  array_agg(src.depth_weight_alpha / (src.depth_weight_alpha + src.depth_weight_beta)
                            ORDER BY src.id) AS source_centers
             FROM memories i
             JOIN memory_supersedes s ON s.insight_id = i.id
             JOIN memories src ON src.id = s.source_id
            WHERE i.memory_type = 'reflection' AND NOT (i.metadata ? 'superseded_by')
            GROUP BY i.id
           HAVING bool_or((src.metadata ? 'superseded_by'
                           AND (src.metadata->>'superseded_by')::bigint <> i.id
                           AND (src.metadata->>'superseded_at')::timestamptz
                               > COALESCE((i.metadata->>'evaluated_at')::timestamptz, i.created_at))
                          OR EXISTS (SELECT 1 FROM consolidation_log l
                                      WHERE l.memory_id = src.id
                                        AND l.actor = ANY($2::text[])
                                        AND COALESCE((l.evidence->>'at')::timestamptz, l.at)
                                            > COALESCE((i.metadata->>'evaluated_at')::timestamptz,
                                                       i.created_at)))
            ORDER BY i.id LIMIT $1""", limit, list(SOURCE_CHANGE_ACTORS))


async def insert_insight(conn: asyncpg.Connection, content: str, embedding: np.ndarray | None,
                         embed_model: str | None, at: datetime, metadata: Mapping[str, Any],
                         source_ids: Sequence[int]) -> int:
    """A reconsolidated insight (type reflection) and its supersedes links, in the caller's transaction."""
    new_id = await conn.fetchval(
        """INSERT INTO memories (content, memory_type, embedding, embed_model, source_tag, created_at, metadata)
           VALUES ($1, 'reflection', $2, $3, 'consolidation', $4, $5::jsonb) RETURNING id""",
        content, None if embedding is None else HalfVector(embedding), embed_model, at, json_param(dict(metadata)))
    await conn.execute(
        """INSERT INTO memory_supersedes (insight_id, source_id, created_at)
           SELECT $1, s, $3 FROM unnest($2::bigint[]) AS s WHERE s <> $1 ON CONFLICT DO NOTHING""",
        new_id, list(source_ids), at)
    return new_id


async def mark_metadata(conn: Executor, memory_ids: Sequence[int], patch: Mapping[str, Any]) -> None:
    """Merge `patch` into the metadata of these memories (not a weight column)."""
    await conn.execute("UPDATE memories SET metadata = metadata || $2::jsonb WHERE id = ANY($1::bigint[])",
                       list(memory_ids), json_param(dict(patch)))


async def superseded_ids(db: Executor, ids: Sequence[int]) -> list[int]:
    rows = await db.fetch("SELECT id FROM memories WHERE id = ANY($1::bigint[]) AND metadata ? 'superseded_by'",
                          list(ids))
    return [r["id"] for r in rows]


async def record_productive_contradiction(conn: Executor, insight_id: int, memory_id: int, at: datetime,
                                          explanation: str) -> None:
    await conn.execute(
        """INSERT INTO productive_contradictions (insight_id, memory_id, at, explanation)
           VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING""", insight_id, memory_id, at, explanation)


# --------------------------------------------------------------------------- temporal replay
async def replay_temporal_chain(db: Executor, now: datetime, lookback_days: float, max_gap_minutes: float,
                                limit: int) -> int:
    """Strengthen co-access links between consecutive episodic memories, flagged temporal.

    A pair is replayed once per lookback window: a link already replayed inside it is
    left alone, so hourly passes over a two-day window do not count a pair 48 times.
    """
    status = await db.execute(
        """WITH ep AS (
               SELECT id, COALESCE(event_time, created_at) AS ts,
                      lag(id) OVER w AS prev_id, lag(COALESCE(event_time, created_at)) OVER w AS prev_ts
                 FROM memories
                WHERE memory_type = 'episodic'
                  AND COALESCE(event_time, created_at) > $1::timestamptz - make_interval(secs => $2::float8)
                  AND COALESCE(event_time, created_at) <= $1
               WINDOW w AS (ORDER BY COALESCE(event_time, created_at), id)),
                pairs AS (
               SELECT LEAST(prev_id, id) AS a, GREATEST(prev_id, id) AS b FROM ep
                WHERE prev_id IS NOT NULL AND ts - prev_ts <= make_interval(secs => $3::float8)
                LIMIT $4)
           INSERT INTO memory_co_access AS c (memory_id_a, memory_id_b, co_access_count, last_co_accessed, temporal)
           SELECT a, b, 1, $1, true FROM pairs
           ON CONFLICT (memory_id_a, memory_id_b) DO UPDATE
              SET co_access_count = c.co_access_count + 1,
                  last_co_accessed = GREATEST(c.last_co_accessed, EXCLUDED.last_co_accessed),
                  temporal = true
            WHERE NOT c.temporal OR c.last_co_accessed <= $1::timestamptz - make_interval(secs => $2::float8)""",
        now, lookback_days * 86400.0, max_gap_minutes * 60.0, limit)
    return int(status.split()[-1])


# --------------------------------------------------------------------------- contextual retrieval
async def lacking_context(db: Executor, limit: int, neighbours: int, chars: int) -> list[asyncpg.Record]:
    """Newest memories without `content_contextualized`, with the memories just before them."""
    return await db.fetch(
        """SELECT m.id, m.content, m.memory_type, m.source_tag, m.created_at,
                  COALESCE((SELECT array_agg(left(p.content, $3) ORDER BY p.created_at)
                              FROM (SELECT content, created_at FROM memories q
                                     WHERE q.created_at < m.created_at
                                     ORDER BY q.created_at DESC LIMIT $2) AS p), '{}') AS before
             FROM memories m
            WHERE m.content_contextualized IS NULL AND NOT m.immutable
            ORDER BY m.created_at DESC, m.id DESC LIMIT $1""", limit, neighbours, chars)


async def write_contextualized(conn: Executor, ids: Sequence[int], texts: Sequence[str],
                               vectors: Sequence[np.ndarray] | None, embed_model: str | None) -> int:
    """Store contextualised text (content_tsv follows) and, when given, the new vectors."""
    if not ids:
        return 0
    if vectors is None:
        status = await conn.execute(
            """UPDATE memories m SET content_contextualized = u.t
                 FROM unnest($1::bigint[], $2::text[]) AS u(id, t)
                WHERE m.id = u.id AND m.content_contextualized IS NULL""", list(ids), list(texts))
    else:
        status = await conn.execute(
            """UPDATE memories m SET content_contextualized = u.t, embedding = u.v, embed_model = $4
                 FROM unnest($1::bigint[], $2::text[], $3::halfvec[]) AS u(id, t, v)
                WHERE m.id = u.id AND m.content_contextualized IS NULL""",
            list(ids), list(texts), [HalfVector(v) for v in vectors], embed_model)
    return int(status.split()[-1])
