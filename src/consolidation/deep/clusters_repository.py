"""The SQL of merge (plan §4.2): `consolidation_clusters`, the clusters already merged.

A cluster is merged once, by fingerprint; candidates are new memories not yet merged,
each with its nearest not-yet-merged neighbours.

A merge states its sources in the present tense as one memory, so nothing a newer statement
updated takes part (issue 37 item 5): a memory superseded by an update (`memory_supersedes`
via 'update', sql/153) is neither a candidate nor a neighbour, nor is a memory derived from
one (a merge or insight that states the earlier fact). A cluster therefore never holds both
ends of an update link, and the older fact is never restated as current beside the newer.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from src.db.sql import Executor

#: Memory `m` may merge: not merged already (a merged memory's insight merges for it), not
#: superseded by an update, and not derived (via merge, insight, narrative) from a memory an
#: update superseded. Fixed SQL over the alias `m`.
_MERGEABLE = """NOT EXISTS (SELECT 1 FROM memory_supersedes s
                              WHERE s.source_id = m.id AND s.via IN ('merge', 'update', 'correction'))
                AND NOT EXISTS (SELECT 1 FROM memory_supersedes d
                                  JOIN memory_supersedes u ON u.source_id = d.source_id AND u.via IN ('update', 'correction')
                                 WHERE d.insight_id = m.id AND d.via NOT IN ('update', 'correction'))"""


async def merge_candidates(conn: Executor, embed_model: str, limit: int, k: int,
                           min_similarity: float) -> list[asyncpg.Record]:
    """New memories not yet merged, each with its nearest not-yet-merged neighbours (both
    mergeable: `_MERGEABLE`).

    (candidate, neighbour, stored-vector similarity) rows above `min_similarity`; one
    statement, a LATERAL top-k per candidate on the HNSW index.
    """
    return await conn.fetch(
        """WITH cand AS (
               SELECT m.id, m.embedding FROM memories m
                WHERE m.embed_model = $1 AND m.embedding IS NOT NULL
                  AND m.memory_type NOT IN ('tension', 'narrative')
                  AND """ + _MERGEABLE + """
                ORDER BY m.created_at DESC, m.id DESC LIMIT $2)
           SELECT c.id AS a, n.id AS b, n.sim
             FROM cand c CROSS JOIN LATERAL (
                 SELECT m.id, 1 - (m.embedding <=> c.embedding) AS sim FROM memories m
                  WHERE m.embed_model = $1 AND m.id <> c.id AND m.embedding IS NOT NULL
                    AND m.memory_type NOT IN ('tension', 'narrative')
                    AND """ + _MERGEABLE + """
                  ORDER BY m.embedding <=> c.embedding LIMIT $3) n
            WHERE n.sim >= $4""", embed_model, limit, k, min_similarity)


async def known_clusters(conn: Executor, fingerprints: Sequence[str]) -> set[str]:
    rows = await conn.fetch("SELECT fingerprint FROM consolidation_clusters WHERE fingerprint = ANY($1::text[])",
                            list(fingerprints))
    return {r["fingerprint"] for r in rows}


async def insert_cluster(conn: asyncpg.Connection, fingerprint: str, insight_id: int, pass_id: int,
                         member_ids: Sequence[int]) -> bool:
    got = await conn.fetchval(
        """INSERT INTO consolidation_clusters (fingerprint, insight_id, pass_id, member_ids)
           VALUES ($1, $2, $3, $4) ON CONFLICT (fingerprint) DO NOTHING RETURNING fingerprint""",
        fingerprint, insight_id, pass_id, list(member_ids))
    return got is not None
