"""The exit gate's novelty lookup (plan §2.9): the stored memories nearest to each item.

Novelty is one of the matrix's two axes: an item is confirming, novel or in between by
its highest cosine to what is already stored under the same embed model (vectors of
another model are never compared). The lookup is one statement for a whole flush.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from src.db.sql import Executor
from src.recall.search import NEWEST_EXACT, USER_STATED, query_vector

# Per item, the index's nearest and the newest $4 rows' nearest compared exactly (read once):
# the index can miss a row stored after it was built (src/recall/search.py NEWEST_EXACT), and
# a fact said again one flush later must meet the first saying, not pass as novel.
NOVELTY_SQL = f"""
WITH newest AS MATERIALIZED (
    SELECT id, content, embedding, {USER_STATED} AS users FROM memories
     WHERE embed_model = $2::text
     ORDER BY id DESC
     LIMIT $4::int)
SELECT q.ord, n.id, 1 - n.distance AS similarity, n.content, n.embedding, n.users
FROM unnest($1::halfvec[]) WITH ORDINALITY AS q(vec, ord)
CROSS JOIN LATERAL (
    SELECT * FROM (
        SELECT DISTINCT ON (id) id, content, embedding, users, distance FROM (
            (SELECT id, content, embedding, {USER_STATED} AS users, embedding <=> q.vec AS distance
               FROM memories
              WHERE embed_model = $2::text
              ORDER BY embedding <=> q.vec
              LIMIT $3::int)
            UNION ALL
            (SELECT id, content, embedding, users, embedding <=> q.vec
               FROM newest
              ORDER BY 5
              LIMIT $3::int)) both_parts
        ORDER BY id) distinct_rows
    ORDER BY distance, id
    LIMIT $3::int) n
ORDER BY q.ord, n.distance, n.id
"""


class SimilarMemory(NamedTuple):
    id: int
    similarity: float
    content: str
    users: bool = False          # the user's own line (src/recall/search.USER_STATED)


async def check_novelty(executor: Executor, vec: np.ndarray | Sequence[float], embed_model: str,
                        k: int = 5) -> list[SimilarMemory]:
    """The `k` stored memories of `embed_model` closest to `vec`, most similar first.

    The first similarity is the maximum the exit gate compares with its thresholds.
    Embedding the candidate (SEMANTIC_SIMILARITY) is the caller's job.
    """
    found, _ = await check_novelty_many(executor, [vec], embed_model, k)
    return found[0]


async def check_novelty_many(executor: Executor, vecs: Sequence[np.ndarray] | np.ndarray, embed_model: str,
                             k: int = 5) -> tuple[list[list[SimilarMemory]], dict[int, np.ndarray]]:
    """`check_novelty` for many vectors in ONE statement (NOVELTY_SQL: a LATERAL top-k per
    vector from the HNSW index and the newest rows), plus the neighbours' embeddings, which
    the exit gate needs to judge opposition — so a flush of 100 items is one query, not 100 + 1."""
    queries = []
    for vec in vecs:
        query = query_vector(vec)
        if query is None:
            raise ValueError("check_novelty needs a vector")
        queries.append(query)
    found: list[list[SimilarMemory]] = [[] for _ in queries]
    embeddings: dict[int, np.ndarray] = {}
    if not queries:
        return found, embeddings
    for r in await executor.fetch(NOVELTY_SQL, queries, embed_model, k, NEWEST_EXACT):
        found[r["ord"] - 1].append(SimilarMemory(r["id"], r["similarity"], r["content"], r["users"]))
        embeddings[r["id"]] = r["embedding"].to_numpy().astype(np.float32)
    return found, embeddings
