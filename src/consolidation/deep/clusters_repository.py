"""The SQL of merge (plan §4.2): `consolidation_clusters`, the clusters already merged.

A cluster is merged once, by fingerprint; candidates are new memories not yet merged and one
window of a walk over the older ones (`walk_window`, `consolidation_walks` sql/157: the whole
store over passes, not only the newest), each with its nearest not-yet-merged neighbours.

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
                           min_similarity: float, also: Sequence[int] = ()) -> list[asyncpg.Record]:
    """New memories not yet merged, and the memories `also` names (the walk's window:
    `walk_window`), each with its nearest not-yet-merged neighbours (both mergeable: `_MERGEABLE`).

    (candidate, neighbour, stored-vector similarity) rows above `min_similarity`; one
    statement, a LATERAL top-k per candidate on the HNSW index.
    """
    return await conn.fetch(
        """WITH cand AS (
               (SELECT m.id, m.embedding FROM memories m
                 WHERE m.embed_model = $1 AND m.embedding IS NOT NULL
                   AND m.memory_type NOT IN ('tension', 'narrative')
                   AND """ + _MERGEABLE + """
                 ORDER BY m.created_at DESC, m.id DESC LIMIT $2)
               UNION
               SELECT m.id, m.embedding FROM memories m
                WHERE m.id = ANY($5::bigint[]) AND m.embed_model = $1 AND m.embedding IS NOT NULL)
           SELECT c.id AS a, n.id AS b, n.sim
             FROM cand c CROSS JOIN LATERAL (
                 SELECT m.id, 1 - (m.embedding <=> c.embedding) AS sim FROM memories m
                  WHERE m.embed_model = $1 AND m.id <> c.id AND m.embedding IS NOT NULL
                    AND m.memory_type NOT IN ('tension', 'narrative')
                    AND """ + _MERGEABLE + """
                  ORDER BY m.embedding <=> c.embedding LIMIT $3) n
            WHERE n.sim >= $4""", embed_model, limit, k, min_similarity, list(also))


#: One window of the walk over older memories (issue 40 item 6): mergeable memories below
#: (start_at, start_id) in (created_at, id) order, newest first; NULL start = the top.
WALK_WINDOW = """
SELECT m.id, m.created_at FROM memories m
 WHERE m.embed_model = $1 AND m.embedding IS NOT NULL
   AND m.memory_type NOT IN ('tension', 'narrative')
   AND ($2::timestamptz IS NULL OR (m.created_at, m.id) < ($2::timestamptz, $3::bigint))
   AND """ + _MERGEABLE + """
 ORDER BY m.created_at DESC, m.id DESC LIMIT $4"""

MERGE_WALK = "merge"


async def walk_window(conn: Executor, embed_model: str, pass_id: int, size: int) -> list[int]:
    """This pass's window of the walk over older memories: `size` mergeable memories below where
    the last pass's window stopped, newest first (at the end of the store, from the top again).
    A pass resumed after a crash takes the window it took before (`consolidation_walks.pass_id`)."""
    if size <= 0:
        return []
    row = await conn.fetchrow("SELECT * FROM consolidation_walks WHERE name = $1", MERGE_WALK)
    if row is not None and row["pass_id"] == pass_id:
        start = (row["start_at"], row["start_id"])
    elif row is not None and row["stop_at"] is not None:
        start = (row["stop_at"], row["stop_id"])
    else:
        start = (None, 0)
    rows = await conn.fetch(WALK_WINDOW, embed_model, start[0], start[1], size)
    stop = (rows[-1]["created_at"], rows[-1]["id"]) if len(rows) == size else (None, None)
    await conn.execute(
        """INSERT INTO consolidation_walks (name, pass_id, start_at, start_id, stop_at, stop_id, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, now())
           ON CONFLICT (name) DO UPDATE SET pass_id = EXCLUDED.pass_id, start_at = EXCLUDED.start_at,
               start_id = EXCLUDED.start_id, stop_at = EXCLUDED.stop_at, stop_id = EXCLUDED.stop_id,
               updated_at = now()""", MERGE_WALK, pass_id, start[0], start[1], stop[0], stop[1])
    return [r["id"] for r in rows]


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
