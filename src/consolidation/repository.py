"""The SQL of consolidation: passes and checkpoints, findings, merges, links, chains.

Weight columns are never written here: weight changes go through
src/weights/apply.apply_weight_changes. New memories are inserted with their initial
Beta like every other writer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np
from pgvector import HalfVector

from src.db.sql import Executor

# -- light: decay, co-access, findings -------------------------------------------------------

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


async def co_access_upkeep(conn: Executor, idle_before: datetime, prune_below: int, limit: int,
                           now: datetime) -> tuple[int, int]:
    """Halve the count of pairs idle since `idle_before` (once per idle period) and delete
    those that fall below `prune_below`. One statement; returns (halved, pruned)."""
    row = await conn.fetchrow(
        """WITH idle AS (
               SELECT memory_id_a, memory_id_b, co_access_count / 2 AS halved
                 FROM memory_co_access
                WHERE GREATEST(last_co_accessed, COALESCE(decayed_at, last_co_accessed)) < $1
                LIMIT $3 FOR UPDATE SKIP LOCKED),
           pruned AS (
               DELETE FROM memory_co_access c USING idle i
                WHERE c.memory_id_a = i.memory_id_a AND c.memory_id_b = i.memory_id_b
                  AND i.halved < $2
               RETURNING 1),
           halved AS (
               UPDATE memory_co_access c SET co_access_count = i.halved, decayed_at = $4
                 FROM idle i
                WHERE c.memory_id_a = i.memory_id_a AND c.memory_id_b = i.memory_id_b
                  AND i.halved >= $2
               RETURNING 1)
           SELECT (SELECT count(*) FROM halved) AS halved, (SELECT count(*) FROM pruned) AS pruned""",
        idle_before, prune_below, limit, now)
    return int(row["halved"]), int(row["pruned"])


async def recently_used(conn: Executor, since: datetime, embed_model: str, limit: int) -> list[int]:
    """Ids of memories retrieved or written since `since` (the light scan's population)."""
    rows = await conn.fetch(
        """SELECT id FROM (
               (SELECT id FROM memories WHERE created_at >= $1 AND embed_model = $2
                 ORDER BY created_at DESC LIMIT $3)
               UNION
               (SELECT id FROM memories WHERE last_accessed >= $1 AND embed_model = $2 LIMIT $3)) u
            ORDER BY id""", since, embed_model, limit)
    return [r["id"] for r in rows]


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


# -- memories as consolidation reads them -----------------------------------------------------

async def recent_memories(conn: Executor, limit: int, *, with_vectors: bool = False,
                          embed_model: str | None = None) -> list[asyncpg.Record]:
    """The newest memories (insights, narratives and tensions are the pass's own: left out)."""
    return await conn.fetch(
        """SELECT id, content, memory_type, created_at, compressed,
                  CASE WHEN $2 THEN embedding END AS embedding
             FROM memories
            WHERE memory_type NOT IN ('tension', 'narrative')
              AND NOT (memory_type = 'reflection' AND metadata->>'kind' = 'insight')
              AND ($3::text IS NULL OR (embed_model = $3 AND embedding IS NOT NULL))
            ORDER BY created_at DESC, id DESC LIMIT $1""", limit, with_vectors, embed_model)


async def memories_by_id(conn: Executor, ids: Sequence[int]) -> list[asyncpg.Record]:
    return await conn.fetch(
        """SELECT id, content, memory_type, created_at, compressed, metadata,
                  depth_weight_alpha AS alpha, depth_weight_beta AS beta, embedding
             FROM memories WHERE id = ANY($1::bigint[]) ORDER BY id""", list(ids))


async def merge_candidates(conn: Executor, embed_model: str, limit: int, k: int,
                           min_similarity: float) -> list[asyncpg.Record]:
    """New memories not yet merged, each with its nearest not-yet-merged neighbours.

    (candidate, neighbour, stored-vector similarity) rows above `min_similarity`; one
    statement, a LATERAL top-k per candidate on the HNSW index.
    """
    return await conn.fetch(
        """WITH cand AS (
               SELECT m.id, m.embedding FROM memories m
                WHERE m.embed_model = $1 AND m.embedding IS NOT NULL
                  AND m.memory_type NOT IN ('tension', 'narrative')
                  AND NOT EXISTS (SELECT 1 FROM memory_supersedes s
                                   WHERE s.source_id = m.id AND s.via = 'merge')
                ORDER BY m.created_at DESC, m.id DESC LIMIT $2)
           SELECT c.id AS a, n.id AS b, n.sim
             FROM cand c CROSS JOIN LATERAL (
                 SELECT o.id, 1 - (o.embedding <=> c.embedding) AS sim FROM memories o
                  WHERE o.embed_model = $1 AND o.id <> c.id AND o.embedding IS NOT NULL
                    AND o.memory_type NOT IN ('tension', 'narrative')
                    AND NOT EXISTS (SELECT 1 FROM memory_supersedes s
                                     WHERE s.source_id = o.id AND s.via = 'merge')
                  ORDER BY o.embedding <=> c.embedding LIMIT $3) n
            WHERE n.sim >= $4""", embed_model, limit, k, min_similarity)


async def known_clusters(conn: Executor, fingerprints: Sequence[str]) -> set[str]:
    rows = await conn.fetch("SELECT fingerprint FROM consolidation_clusters WHERE fingerprint = ANY($1::text[])",
                            list(fingerprints))
    return {r["fingerprint"] for r in rows}


async def insert_memory(conn: asyncpg.Connection, *, content: str, memory_type: str,
                        embedding: np.ndarray | None, embed_model: str | None, alpha: float, beta: float,
                        source_tag: str, compressed: str | None, metadata: Mapping[str, Any]) -> int:
    return await conn.fetchval(
        """INSERT INTO memories (content, memory_type, embedding, embed_model, depth_weight_alpha,
                                 depth_weight_beta, source_tag, compressed, metadata)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb) RETURNING id""",
        content, memory_type, None if embedding is None else HalfVector(embedding),
        embed_model if embedding is not None else None, alpha, beta, source_tag, compressed,
        json.dumps(dict(metadata), default=str, ensure_ascii=False))


async def insert_links(conn: asyncpg.Connection, insight_id: int, source_ids: Sequence[int], via: str) -> None:
    await conn.execute(
        """INSERT INTO memory_supersedes (insight_id, source_id, via)
           SELECT $1, unnest($2::bigint[]), $3 ON CONFLICT DO NOTHING""", insight_id, list(source_ids), via)


async def insert_cluster(conn: asyncpg.Connection, fingerprint: str, insight_id: int, pass_id: int,
                         member_ids: Sequence[int]) -> bool:
    got = await conn.fetchval(
        """INSERT INTO consolidation_clusters (fingerprint, insight_id, pass_id, member_ids)
           VALUES ($1, $2, $3, $4) ON CONFLICT (fingerprint) DO NOTHING RETURNING fingerprint""",
        fingerprint, insight_id, pass_id, list(member_ids))
    return got is not None


async def centers(conn: Executor, ids: Sequence[int]) -> dict[int, float]:
    rows = await conn.fetch(
        """SELECT id, depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) AS c
             FROM memories WHERE id = ANY($1::bigint[])""", list(ids))
    return {r["id"]: r["c"] for r in rows}


async def narrative_candidates(conn: Executor, min_sources: int, limit: int) -> list[asyncpg.Record]:
    """Merge insights of min_sources+ memories that have no narrative yet."""
    return await conn.fetch(
        """SELECT i.id, i.content, array_agg(s.source_id ORDER BY s.source_id) AS sources
             FROM memories i JOIN memory_supersedes s ON s.insight_id = i.id AND s.via = 'merge'
            WHERE NOT EXISTS (SELECT 1 FROM memory_supersedes n
                               WHERE n.source_id = i.id AND n.via = 'narrative')
            GROUP BY i.id, i.content HAVING count(*) >= $1
            ORDER BY i.id LIMIT $2""", min_sources, limit)


async def recompress_candidates(conn: Executor, limit: int) -> list[asyncpg.Record]:
    """Members of merged clusters and themes whose `compressed` is still the gate's."""
    return await conn.fetch(
        """WITH groups AS (
               SELECT 'c:' || fingerprint AS grp, member_ids FROM consolidation_clusters
               UNION ALL
               SELECT 't:' || fingerprint, memory_ids FROM consolidation_findings WHERE kind = 'theme'),
           members AS (SELECT DISTINCT ON (m.id) g.grp, g.member_ids, m.id, m.content, m.compressed
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


# -- tensions -----------------------------------------------------------------------------------

async def value_memories(conn: Executor, min_center: float, limit: int) -> list[asyncpg.Record]:
    """Value/goal-like memories (metadata kind 'value' or 'goal') above `min_center`."""
    return await conn.fetch(
        """SELECT id, content, depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) AS center
             FROM memories
            WHERE metadata->>'kind' IN ('value', 'goal')
              AND depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) > $1
            ORDER BY center DESC, id LIMIT $2""", min_center, limit)


async def recent_behaviour(conn: Executor, limit: int) -> list[asyncpg.Record]:
    """The mind's own recent words and acts (source internal_self), newest first."""
    return await conn.fetch(
        """SELECT id, content, created_at FROM memories
            WHERE source_tag = 'internal_self' AND memory_type NOT IN ('tension', 'narrative', 'reflection')
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


# -- why do I believe ----------------------------------------------------------------------------

async def supersedes_chain(conn: Executor, memory_id: int, max_depth: int = 20) -> list[asyncpg.Record]:
    """The memory and everything it was built from, depth-first order of discovery."""
    return await conn.fetch(
        """WITH RECURSIVE chain(id, parent, via, depth, path) AS (
               SELECT $1::bigint, NULL::bigint, NULL::text, 0, ARRAY[$1::bigint]
               UNION ALL
               SELECT s.source_id, c.id, s.via, c.depth + 1, c.path || s.source_id
                 FROM chain c JOIN memory_supersedes s ON s.insight_id = c.id
                WHERE c.depth < $2 AND NOT s.source_id = ANY(c.path))
           SELECT c.id, c.parent, c.via, c.depth, c.path, m.content, m.memory_type, m.created_at,
                  m.depth_weight_alpha AS alpha, m.depth_weight_beta AS beta, m.metadata
             FROM chain c JOIN memories m ON m.id = c.id
            ORDER BY c.path""", memory_id, max_depth)
