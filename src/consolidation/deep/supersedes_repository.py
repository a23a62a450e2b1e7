"""The SQL of `memory_supersedes`: derived memories and the links to what they came from.

Insights, narratives and tensions (plan §4.2) and reconsolidated insights (§4.4) are
inserted with their initial Beta like every other writer, and linked to their sources;
`why` (§4.2) walks the links back, and reconsolidation finds insights whose sources
changed since. Weight columns are never written here.

A link via 'update' (sql/153) is no derivation: a newer statement the user made supersedes
an older one about the same subject, which stays stored as earlier. The readers here that
mean "derived from" (an insight's sources, a merge's members) leave it out; `why`'s chain
keeps it (src/consolidation/deep/why.py names it in words), and a source an update
superseded is a changed source of the insights drawn from it.

Every statement is set-based with bound parameters. Times written here are the
caller's `now` (tests fix it); rows the weight choke point writes carry `now` in
their evidence (`evidence->>'at'`), which is what the "already done since …" rules
compare against, so a test with a fixed clock sees its own history.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import asyncpg
import numpy as np
from pgvector import HalfVector

from src.db.sql import Executor, json_param

if TYPE_CHECKING:
    from src.recall.store import NewMemory

#: The source tag of everything consolidation writes (insights, merges, narratives,
#: tensions, reconsolidated insights): the mind's own conclusions, not new experience
#: (checkpoints.new_experiences_since_last_pass leaves them out).
SOURCE_TAG = "internal_consolidation"


#: The memories superseded by an update (sql/153) and since when, as a relation (id, at)
#: to join: `at` is when the first successor was stored, the mind's clock (the exit gate
#: links a newer statement as it stores it; src/gates/updates.py). Fixed SQL.
SUPERSEDED_BY_UPDATE = """(SELECT u.source_id AS id, min(n.created_at) AS at
       FROM memory_supersedes u JOIN memories n ON n.id = u.insight_id
      WHERE u.via IN ('update', 'correction') GROUP BY u.source_id)"""


async def insert_memory(conn: asyncpg.Connection, memory: NewMemory, *, embedding: np.ndarray | None,
                        embed_model: str | None) -> int:
    """Insert a derived memory; its id. Written: content, type, Beta, source tag, compressed
    text and metadata; `embed_model` only with an embedding. Its event time, source
    confidence, immutability and conversation context stay at the table's defaults."""
    return await conn.fetchval(
        """INSERT INTO memories (content, memory_type, embedding, embed_model, depth_weight_alpha,
                                 depth_weight_beta, source_tag, compressed, metadata)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb) RETURNING id""",
        memory.content, memory.memory_type, None if embedding is None else HalfVector(embedding),
        embed_model if embedding is not None else None, memory.alpha, memory.beta, memory.source_tag,
        memory.compressed, json.dumps(dict(memory.metadata or {}), default=str, ensure_ascii=False))


async def insert_links(conn: asyncpg.Connection, insight_id: int, source_ids: Sequence[int], via: str) -> None:
    await conn.execute(
        """INSERT INTO memory_supersedes (insight_id, source_id, via)
           SELECT $1, unnest($2::bigint[]), $3 ON CONFLICT DO NOTHING""", insight_id, list(source_ids), via)


async def insert_insight(conn: asyncpg.Connection, content: str, embedding: np.ndarray | None,
                         embed_model: str | None, at: datetime, metadata: Mapping[str, Any],
                         source_ids: Sequence[int]) -> int:
    """A reconsolidated insight (type reflection) and its supersedes links, in the caller's transaction."""
    new_id = await conn.fetchval(
        """INSERT INTO memories (content, memory_type, embedding, embed_model, source_tag, created_at, metadata)
           VALUES ($1, 'reflection', $2, $3, $6, $4, $5::jsonb) RETURNING id""",
        content, None if embedding is None else HalfVector(embedding), embed_model, at, json_param(dict(metadata)),
        SOURCE_TAG)
    await conn.execute(
        """INSERT INTO memory_supersedes (insight_id, source_id, created_at)
           SELECT $1, s, $3 FROM unnest($2::bigint[]) AS s WHERE s <> $1 ON CONFLICT DO NOTHING""",
        new_id, list(source_ids), at)
    return new_id


async def narrative_candidates(conn: Executor, min_sources: int, limit: int) -> list[asyncpg.Record]:
    """Merge insights of min_sources+ memories that have no narrative yet."""
    return await conn.fetch(
        """SELECT i.id, i.content, array_agg(s.source_id ORDER BY s.source_id) AS sources
             FROM memories i JOIN memory_supersedes s ON s.insight_id = i.id AND s.via = 'merge'
            WHERE NOT EXISTS (SELECT 1 FROM memory_supersedes n
                               WHERE n.source_id = i.id AND n.via = 'narrative')
            GROUP BY i.id, i.content HAVING count(*) >= $1
            ORDER BY i.id LIMIT $2""", min_sources, limit)


#: Weight changes that mean a source changed: faded, demoted, superseded or promoted. Not
#: retrieval, the gate, the light ticker's small decay, nor the give-way of sources when an
#: insight is formed (actor 'consolidation'): those are the insight's normal life.
SOURCE_CHANGE_ACTORS = ("decay", "demotion", "reconsolidation", "promotion")


async def insights_with_changed_sources(db: Executor, limit: int) -> list[asyncpg.Record]:
    """Live insights a source of which changed since the insight was last evaluated.

    A source changed when one of SOURCE_CHANGE_ACTORS wrote a weight change for it, or
    it was itself superseded (by another insight than this one) since the evaluation, or
    a newer statement updated it since (an update stored after the evaluation: the insight
    may now state an earlier fact as current, issue 37 item 5). Each source comes with
    its newest update, if any (`source_updates`: the newer text; `source_updated_at`: when
    it was said), for the question to show it as earlier.
    """
    return await db.fetch(
        """SELECT i.id, i.content,
                  array_agg(src.id ORDER BY src.id) AS source_ids,
                  array_agg(left(src.content, 400) ORDER BY src.id) AS source_contents,
                  array_agg(src.depth_weight_alpha / (src.depth_weight_alpha + src.depth_weight_beta)
                            ORDER BY src.id) AS source_centers,
                  array_agg(left(upd.content, 400) ORDER BY src.id) AS source_updates,
                  array_agg(upd.said ORDER BY src.id) AS source_updated_at
             FROM memories i
             -- the insight's sources: what it was derived from, not what an update replaced
             JOIN memory_supersedes s ON s.insight_id = i.id AND s.via NOT IN ('update', 'correction')
             JOIN memories src ON src.id = s.source_id
             LEFT JOIN LATERAL (
                 SELECT n.content, COALESCE(n.event_time, n.created_at) AS said
                   FROM memory_supersedes u JOIN memories n ON n.id = u.insight_id
                  WHERE u.source_id = src.id AND u.via IN ('update', 'correction')
                  ORDER BY 2 DESC, n.id DESC LIMIT 1) upd ON true
            WHERE i.memory_type = 'reflection' AND NOT (i.metadata ? 'superseded_by')
            GROUP BY i.id
           HAVING bool_or((src.metadata ? 'superseded_by'
                           AND (src.metadata->>'superseded_by')::bigint <> i.id
                           AND (src.metadata->>'superseded_at')::timestamptz
                               > COALESCE((i.metadata->>'evaluated_at')::timestamptz, i.created_at))
                          OR EXISTS (SELECT 1 FROM memory_supersedes u JOIN memories n ON n.id = u.insight_id
                                      WHERE u.source_id = src.id AND u.via IN ('update', 'correction')
                                        AND n.created_at > COALESCE((i.metadata->>'evaluated_at')::timestamptz,
                                                                    i.created_at))
                          OR EXISTS (SELECT 1 FROM consolidation_log l
                                      WHERE l.memory_id = src.id
                                        AND l.actor = ANY($2::text[])
                                        AND COALESCE((l.evidence->>'at')::timestamptz, l.at)
                                            > COALESCE((i.metadata->>'evaluated_at')::timestamptz,
                                                       i.created_at)))
            ORDER BY i.id LIMIT $1""", limit, list(SOURCE_CHANGE_ACTORS))


async def supersedes_chain(conn: Executor, memory_id: int, max_depth: int = 20) -> list[asyncpg.Record]:
    """The memory and everything it was built from, depth-first order of discovery.

    Every link, update links included (`via` says which): why.py names an update in words."""
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
