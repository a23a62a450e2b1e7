"""The SQL of the rows and columns of `memories` the deep pass writes outside the choke point.

`compressed` (re-compression, §4.2), `content_contextualized` and its vector (contextual
retrieval, §4.6), tension memories' status (§4.2) and the `superseded_by` marks of
reconsolidation (§4.4), with the reads that choose them and the phases' read of
memories by id. Weight columns are never
written here: weight changes go through src/weights/apply.apply_weight_changes.

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


async def memories_by_id(conn: Executor, ids: Sequence[int]) -> list[asyncpg.Record]:
    """The memories a phase works on, with their weights, vectors, whether they are seeds
    (immutable, source tag: integrity.is_seed) and whether they were imported (evidence.is_stranger)."""
    return await conn.fetch(
        """SELECT id, content, memory_type, created_at, compressed, metadata, immutable, source_tag,
                  depth_weight_alpha AS alpha, depth_weight_beta AS beta, embedding,
                  import_key IS NOT NULL AS imported
             FROM memories WHERE id = ANY($1::bigint[]) ORDER BY id""", list(ids))


async def insight_exists(conn: Executor, text: str) -> bool:
    """Whether an insight (a reflection of kind 'insight') says `text`, case and spacing aside."""
    return await conn.fetchval(
        r"""SELECT EXISTS (SELECT 1 FROM memories
                           WHERE memory_type = 'reflection' AND metadata ->> 'kind' = 'insight'
                             AND lower(regexp_replace(btrim(content), '\s+', ' ', 'g')) = lower($1))""",
        " ".join(text.split()))


async def recompress_candidates(conn: Executor, limit: int) -> list[asyncpg.Record]:
    """Members of merged clusters and themes whose `compressed` is still the gate's."""
    return await conn.fetch(
        """WITH groups AS (
               SELECT 'c:' || fingerprint AS grp, member_ids FROM consolidation_clusters
               UNION ALL
               SELECT 't:' || fingerprint, memory_ids FROM consolidation_findings WHERE kind = 'theme'),
           members AS (SELECT DISTINCT ON (m.id) g.grp, g.member_ids, m.id, m.content, m.compressed,
                              m.source_tag, m.metadata
                         FROM groups g JOIN memories m ON m.id = ANY(g.member_ids)
                        WHERE m.compressed IS NOT NULL AND NOT (m.metadata ? 'recompressed_at')
                        ORDER BY m.id, g.grp)
           SELECT * FROM members ORDER BY id LIMIT $1""", limit)


async def update_compressed(conn: asyncpg.Connection, ids: Sequence[int], texts: Sequence[str],
                            at: datetime, pass_id: int) -> int:
    result = await conn.execute(
        """UPDATE memories m SET compressed = u.text,
                  metadata = m.metadata || jsonb_build_object('recompressed_at', $3::timestamptz,
                                                              'recompressed_by_pass', $4::bigint,
                                                              'gate_compressed', m.compressed)
             FROM unnest($1::bigint[], $2::text[]) AS u(id, text) WHERE m.id = u.id""",
        list(ids), list(texts), at, pass_id)
    return int(result.split()[-1])


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


async def value_memories(conn: Executor, min_center: float, limit: int) -> list[asyncpg.Record]:
    """Value/goal-like memories (metadata kind 'value' or 'goal') above `min_center`."""
    return await conn.fetch(
        """SELECT id, content, depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) AS center
             FROM memories
            WHERE metadata->>'kind' IN ('value', 'goal')
              AND depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) > $1
            ORDER BY center DESC, id LIMIT $2""", min_center, limit)


async def recent_behaviour(conn: Executor, limit: int) -> list[asyncpg.Record]:
    """The mind's own recent words and acts, newest first: what it said (internal_self) and
    what it answered its own thoughts without saying it (internal_thought) — both are how it
    behaves; a thought held back by the unprompted bar is still the mind's stance."""
    return await conn.fetch(
        """SELECT id, content, created_at FROM memories
            WHERE source_tag IN ('internal_self', 'internal_thought') AND memory_type NOT IN ('tension', 'narrative', 'reflection')
            ORDER BY created_at DESC, id DESC LIMIT $1""", limit)


async def open_tension(conn: Executor, value_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(
        """SELECT id, created_at, metadata FROM memories
            WHERE memory_type = 'tension' AND (metadata->>'value_id')::bigint = $1
              AND COALESCE(metadata->>'resolved', 'false') <> 'true'
            ORDER BY id DESC LIMIT 1""", value_id)


async def resolve_tension(conn: Executor, tension_id: int, at: datetime, evidence: Sequence[int]) -> None:
    await conn.execute(
        """UPDATE memories SET metadata = metadata || jsonb_build_object(
                  'resolved', true, 'status', 'resolved', 'resolved_at', $2::timestamptz,
                  'resolved_by', $3::bigint[]) WHERE id = $1""", tension_id, at, list(evidence))


async def tension_fatigue(conn: Executor, surfaces: int) -> int:
    """Unresolved tensions that surfaced more than `surfaces` times become 'acknowledged'.

    surface_count is how often the tension was retrieved into context (access_count).
    """
    result = await conn.execute(
        """UPDATE memories SET metadata = metadata || jsonb_build_object(
                  'surface_count', access_count, 'status', 'acknowledged')
            WHERE memory_type = 'tension' AND access_count > $1
              AND COALESCE(metadata->>'resolved', 'false') <> 'true'
              AND COALESCE(metadata->>'status', '') <> 'acknowledged'""", surfaces)
    return int(result.split()[-1])


async def mark_metadata(conn: Executor, memory_ids: Sequence[int], patch: Mapping[str, Any]) -> None:
    """Merge `patch` into the metadata of these memories (not a weight column)."""
    await conn.execute("UPDATE memories SET metadata = metadata || $2::jsonb WHERE id = ANY($1::bigint[])",
                       list(memory_ids), json_param(dict(patch)))


async def superseded_ids(db: Executor, ids: Sequence[int]) -> list[int]:
    rows = await db.fetch("SELECT id FROM memories WHERE id = ANY($1::bigint[]) AND metadata ? 'superseded_by'",
                          list(ids))
    return [r["id"] for r in rows]
