"""Hybrid search (plan §2.5) and the rerank stage (§2.6).

Reading side of `memories`: `search_hybrid` (the one-statement search),
`fetch_hits` (the same row shape for ids that spreading activation brought in),
and `rerank_hits` (the cross-encoder stage, pure apart from the reranker call). The
exit gate's novelty lookup is src/gates/novelty.py.

`search_hybrid` is one SQL statement with CTEs:

* vector arm: top-`candidates` by `embedding <=> query` over the HNSW index
  (iterative scan is SET on every pool connection) and over the newest NEWEST_EXACT
  rows compared exactly (the index can miss a row stored after it was built: a fact the
  user just typed), restricted to rows of the current `embed_model`; vectors of another
  model are never compared;
* full-text arm: top-`candidates` over `content_tsv`, ranked by the sum of the
  inverse document frequencies of the question's lexemes a row contains (BM25's idf,
  ln(1 + (N - df + 0.5) / (df + 0.5)); N from the planner's row estimate, df counted
  per lexeme up to DF_COUNT_CAP rows). ts_rank counts how often any lexeme occurs,
  so "How old is our cat Miso?" ranked every chat about old cats above the one memory
  naming Miso; names and rare words are what a user's facts hang on (issue 22).
  Scoring is the arm's cost, so it scores every row that holds a rare lexeme (df under
  DF_COUNT_CAP) but at most COMMON_ROWS_CAP of the rows holding only common ones:
  before, a common-word question scored every matching row (measured: notes.md). The
  question becomes an OR of its own lexemes: `to_tsvector('english', question)`
  is unnested, each lexeme is quoted for tsquery input (`'` doubled, `\\`
  escaped) and the `'a' | 'b'` string is cast to ::tsquery. The cast reads
  lexemes verbatim (no second stemming, no operator parsing), so quotes, colons,
  `&|!()` in a question cannot change the query's shape. A question of stop words
  only gives a NULL tsquery: the arm returns nothing, with no error and no NOTICE
  (to_tsquery would print one). Rows of every embed model are found here;
* own arm (a question the user's statements may answer, src/recall/scoring.asks_of_user; `w_own` > 0): the user's own statements (sql/151),
  the index's nearest of them and the newest OWN_EXACT compared exactly. Among thousands of imported chat lines and
  the mind's own, a fact the user stated and later asks about in other words is rarely in
  the vector arm's candidates; among the user's own lines it is near the top;
* fusion: RRF, w_arm / (k + rank), summed over the arms a row appears in: exactly
  src/recall/rrf.rrf_fuse, which the tests hold the SQL against;
* recency: EXP(-0.693 * age / 604800.0), a 7-day half-life, age measured from
  COALESCE(last_accessed, event_time, created_at): a memory that was recalled
  lately is "recent" (plan §3.1 decays recency from last_accessed), else the time
  the event happened, else when it was stored. Negative ages count as 0.

    score = rrf / rrf_max + w_recency * recency

`rrf_max` is what a row ranked first by every arm that ran would get (an arm that
did not run: no query vector, or a question of stop words only), so the relevance
part lies in [0, 1] and recency adds at most `w_recency` (0.1 by default). An
additive, bounded term: a year-old memory that both arms rank first scores 1.0,
and a brand-new memory needs relevance above 0.9 to pass it; with k = 60 that is
roughly rank 8 or better in both arms. So recency breaks near-ties (second in both
arms, fresh, beats first in both, a year old) but cannot lift a weak match. A
multiplier would let age erase relevance (after a year, exp(-36) ≈ 2e-16) and old
memories would be lost.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np
from pgvector import HalfVector

from src.db.sql import Executor
from src.recall.hit import SearchHit
from src.recall.rerank import RankedHit, RerankResult, normalise_scores, rerank_hits
from src.recall.store import EMBEDDING_DIMENSIONS
from src.text import clean_text

__all__ = [
    "Executor", "RankedHit", "RerankResult", "SearchHit",
    "HybridTuning", "fetch_hits", "hybrid_arguments", "normalise_scores", "query_vector", "rerank_hits", "search_hybrid",
    "similarities",
]

log = logging.getLogger(__name__)


#: The question $1 as an OR of its own lexemes (NULL when it has none); see above.
QUESTION_TSQUERY = r"""(
    SELECT string_agg('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''', ' | ')::tsquery
    FROM unnest(tsvector_to_array(to_tsvector('english', left($1::text, 100000)))) AS lexeme
)"""

#: The `memories` columns of a SearchHit, read by both statements below.
#: Rows counted for a lexeme's document frequency: past this a word is common, and the
#: count (a GIN bitmap scan plus heap fetches) stops. Its idf then floors at about
#: ln(N / cap) instead of ln(N / df): common words still rank below rare ones.
DF_COUNT_CAP = 1000
#: Rows holding only the question's common lexemes (df at the cap) that the full-text arm
#: scores at most: the arm's cost is bounded by rare-lexeme rows + this (issue 24).
COMMON_ROWS_CAP = 2000
#: The newest memories the vector arm compares exactly, beside the HNSW index's nearest.
#: pgvector's HNSW can leave a row inserted after the index was built hard to reach: facts
#: typed after an import were the exact nearest to the questions about them, yet not among
#: the index's candidates (notes.md). What the user said last is what they expect back first.
NEWEST_EXACT = 1000
#: The user's newest statements the own arm compares exactly (a question about the user),
#: beside the index's nearest of all their lines: as in the vector arm, the index can miss
#: a line stored after it was built, and in a store of other people's chat the user's
#: lines are too few for a filtered index scan to reach.
OWN_EXACT = 1000
#: Whether a row is the user's own line: src/recall/speakers.speaker_of in SQL, word for word
#: the predicate of sql/151's partial index (so the planner can use it).
USER_STATED = r"""CASE WHEN jsonb_typeof(metadata -> 'speaker') = 'string'
                    AND btrim(metadata ->> 'speaker', E' \t\n\r') <> ''
               THEN lower(btrim(metadata ->> 'speaker', E' \t\n\r')) = 'user'
               ELSE source_tag = 'external_user' END"""


def _nearest(rows: str, newest: str) -> str:
    """The body of a vector arm over the memories where `rows` holds: the HNSW index's
    nearest `$4` (iterative scan) and the newest `newest` compared exactly, each memory once at
    its distance, nearest first. The index can miss a row stored after it was built."""
    return f"""
    SELECT id, min(distance) AS distance FROM (
        (SELECT id, embedding <=> $2::halfvec AS distance
           FROM memories
          WHERE {rows}
          ORDER BY embedding <=> $2::halfvec
          LIMIT $4::int)
        UNION ALL
        (SELECT id, embedding <=> $2::halfvec
           FROM (SELECT id, embedding FROM memories
                  WHERE {rows}
                  ORDER BY id DESC
                  LIMIT {newest}::int) newest
          ORDER BY 2
          LIMIT $4::int)) arms
    GROUP BY id
    ORDER BY 2, 1
    LIMIT $4::int
"""

_MEMORY_COLUMNS = """m.id, m.content, m.compressed, m.memory_type, m.depth_weight_alpha AS alpha,
           m.depth_weight_beta AS beta, m.immutable, m.source_tag, m.source_confidence,
           m.access_count, m.last_accessed, m.access_timestamps, m.event_time, m.created_at,
           m.metadata, m.embedding, m.embed_model,
           sup.superseded_by, sup.superseded_at"""
#: The newest update that superseded a memory `m` (sql/153): joined LATERAL beside it.
_SUPERSEDED = """LEFT JOIN LATERAL (
        SELECT s.insight_id AS superseded_by, COALESCE(n.event_time, n.created_at) AS superseded_at
          FROM memory_supersedes s JOIN memories n ON n.id = s.insight_id
         WHERE s.source_id = m.id AND s.via IN ('update', 'correction')
         ORDER BY 2 DESC, 1 DESC LIMIT 1) sup ON true"""

HYBRID_SQL = r"""
WITH vec AS MATERIALIZED (
    -- the HNSW index's nearest, and the newest $13 rows compared exactly (NEWEST_EXACT)
""" + _nearest("$2::halfvec IS NOT NULL AND embed_model = $3::text", "$13") + r"""),
vec_ranked AS (
    -- relaxed_order iterative scans may return rows slightly out of order: rank here
    SELECT id, ROW_NUMBER() OVER (ORDER BY distance, id) AS vec_rank FROM vec
),
question AS (
    SELECT """ + QUESTION_TSQUERY + r""" AS tsq
),
terms AS MATERIALIZED (
    SELECT (SELECT count(*) FROM (SELECT 1 FROM memories WHERE content_tsv @@ t.q
                                   LIMIT $11::int) c) AS df, t.q, t.own
    -- each lexeme anywhere in the document (q), and in the memory's own text only (own:
    -- weight A, sql/150)
    FROM (SELECT (quoted || '''')::tsquery AS q, (quoted || ''':A')::tsquery AS own
          FROM (SELECT '''' || replace(replace(lexeme, '\', '\\'), '''', '''''') AS quoted
                FROM unnest(tsvector_to_array(to_tsvector('english', left($1::text, 100000)))) AS lexeme) l
         ) t
),
weighted AS MATERIALIZED (
    SELECT q, own, ln(1 + (n - df + 0.5) / (df + 0.5)) AS idf, ln(1 + n) AS idf_unique
    FROM (SELECT q, own, df, GREATEST((SELECT reltuples FROM pg_class WHERE oid = 'memories'::regclass),
                                      max(df) OVER (), 1) AS n
          FROM terms) c
),
pool AS MATERIALIZED (
    -- rows holding a rare lexeme (df under the cap: at most DF_COUNT_CAP rows each), and at
    -- most $12 of the rows holding only common ones: the arm never scores every row that
    -- shares a common word with the question
    SELECT id FROM memories
    WHERE content_tsv @@ (SELECT string_agg(q::text, ' | ')::tsquery FROM terms WHERE df < $11::int)
    UNION
    (SELECT id FROM memories WHERE content_tsv @@ (SELECT tsq FROM question) LIMIT $12::int)
),
fts AS MATERIALIZED (
    -- a lexeme of the memory's own text counts fully, one only in its conversation context
    -- (src/recall/conversation.py) at w_context ($14)
    SELECT id, (SELECT sum(w.idf * CASE WHEN m.content_tsv @@ w.own THEN 1 ELSE $14::float8 END)
                  FROM weighted w WHERE m.content_tsv @@ w.q)::real AS fts_score
    FROM pool JOIN memories m USING (id)
    ORDER BY fts_score DESC, id
    LIMIT $4::int
),
fts_ranked AS (
    SELECT id, fts_score, ROW_NUMBER() OVER (ORDER BY fts_score DESC, id) AS fts_rank FROM fts
),
own AS MATERIALIZED (
    -- the user's own statements, only for a question about the user ($16 > 0): the HNSW
    -- index's nearest of them (a filtered iterative scan) and the newest $17 compared exactly
""" + _nearest("$16::float8 > 0 AND $2::halfvec IS NOT NULL AND embed_model = $3::text AND " + USER_STATED,
               "$17") + r"""),
own_ranked AS (
    SELECT id, ROW_NUMBER() OVER (ORDER BY distance, id) AS own_rank FROM own
),
fused AS (
    -- a full-text row counts by how strong its evidence is: its score against $15 times the
    -- idf of a word only one memory holds (1: a rare word; a few common words: less)
    SELECT id, v.vec_rank, f.fts_rank, f.fts_score, o.own_rank,
           COALESCE($6::float8 / ($5::float8 + v.vec_rank), 0)
           + COALESCE($7::float8
                      * LEAST(1.0, f.fts_score / NULLIF($15::float8 * (SELECT max(idf_unique) FROM weighted), 0))
                      / ($5::float8 + f.fts_rank), 0)
           + COALESCE($16::float8 / ($5::float8 + o.own_rank), 0) AS rrf
    FROM vec_ranked v FULL JOIN fts_ranked f USING (id) FULL JOIN own_ranked o USING (id)
),
scored AS (
    SELECT """ + _MEMORY_COLUMNS + r""",
           CASE WHEN m.embed_model = $3::text THEN 1 - (m.embedding <=> $2::halfvec) END
               AS similarity,
           u.vec_rank, u.fts_rank, u.fts_score, u.own_rank, u.rrf,
           EXP(-0.693 * GREATEST(EXTRACT(EPOCH FROM
                   COALESCE($9::timestamptz, now())
                   - COALESCE(m.last_accessed, m.event_time, m.created_at))::float8, 0)
               / 604800.0) AS recency
    FROM fused u JOIN memories m USING (id)
    """ + _SUPERSEDED + r"""
)
SELECT s.*,
       -- rrf_max: what a row ranked first by every arm that ran would get
       COALESCE(s.rrf / NULLIF((CASE WHEN $2::halfvec IS NULL THEN 0 ELSE $6::float8 END
                                + CASE WHEN (SELECT tsq FROM question) IS NULL THEN 0
                                       ELSE $7::float8 END
                                + CASE WHEN EXISTS (SELECT 1 FROM own) THEN $16::float8 ELSE 0 END)
                               / ($5::float8 + 1), 0), 0)
       + $8::float8 * s.recency AS score
FROM scored s
ORDER BY score DESC, rrf DESC, id
LIMIT $10::int
"""

FETCH_SQL = """
SELECT """ + _MEMORY_COLUMNS + """,
       CASE WHEN m.embed_model = $3::text THEN 1 - (m.embedding <=> $2::halfvec) END AS similarity,
       NULL::bigint AS vec_rank, NULL::bigint AS fts_rank, NULL::real AS fts_score,
       NULL::bigint AS own_rank, 0::float8 AS rrf, r.recency, 0::float8 AS score
FROM unnest($1::bigint[]) WITH ORDINALITY AS wanted(id, ord)
JOIN memories m USING (id)
""" + _SUPERSEDED + """
CROSS JOIN LATERAL (
    SELECT EXP(-0.693 * GREATEST(EXTRACT(EPOCH FROM
               COALESCE($4::timestamptz, now())
               - COALESCE(m.last_accessed, m.event_time, m.created_at))::float8, 0)
           / 604800.0) AS recency) r
ORDER BY wanted.ord
"""


SIMILARITIES_SQL = """
SELECT id, GREATEST(1 - (embedding <=> $2::halfvec), 0)::float8 AS cosine
FROM memories WHERE id = ANY($1::bigint[]) AND embed_model = $3::text
"""


async def similarities(executor: Executor, ids: Sequence[int], query_vec: np.ndarray | Sequence[float] | None,
                       *, embed_model: str) -> dict[int, float] | None:
    """Cosine (at least 0) of each memory in `ids` to the question; None without a question
    vector. Rows without a vector of `embed_model` are left out."""
    if query_vec is None or not ids:
        return None
    rows = await executor.fetch(SIMILARITIES_SQL, list(ids), query_vector(query_vec), embed_model)
    return {r["id"]: r["cosine"] for r in rows}


def query_vector(query_vec: np.ndarray | Sequence[float] | None) -> HalfVector | None:
    if query_vec is None:
        return None
    vec = np.asarray(query_vec, dtype=np.float32)
    if vec.shape != (EMBEDDING_DIMENSIONS,) or not np.all(np.isfinite(vec)) or not vec.any():
        raise ValueError(f"query vector must be {EMBEDDING_DIMENSIONS} finite floats, not all "
                         f"zero; got shape {vec.shape}")
    return HalfVector(vec)


@dataclass(frozen=True)
class HybridTuning:
    """The knobs of one hybrid search, checked once: result `limit`, RRF `k`, the arm
    weights and the candidates each arm contributes (retrieval.* in runtime.yaml)."""

    limit: int = 20
    k: float = 60
    w_vector: float = 1.0
    w_fulltext: float = 1.0
    w_recency: float = 0.1
    candidates: int = 50
    # what a question's word found only in a memory's conversation context counts, against
    # 1 for a word of the memory itself (src/recall/conversation.py)
    w_context: float = 0.5
    # full text's evidence: a row counts fully in the fusion when its score reaches this share
    # of the idf of a word only one memory holds, less below it; 0: every row fully
    fts_confidence: float = 0.0
    # the own arm's weight: the user's own statements, for a question they may answer (the
    # caller decides: src/recall/scoring.asks_of_user); 0: the arm does not run
    w_own: float = 0.0

    def __post_init__(self) -> None:
        for name in ("k", "w_vector", "w_fulltext", "w_recency", "w_context", "fts_confidence", "w_own"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.limit < 1 or self.candidates < 1:
            raise ValueError(f"limit and candidates must be >= 1, got {self.limit} and {self.candidates}")


def hybrid_arguments(query_text: str | bytes, query_vec: np.ndarray | Sequence[float] | None, *,
                     embed_model: str, now: datetime | None = None, **tuning: Any) -> tuple[Any, ...]:
    """Check the arguments and return HYBRID_SQL's parameters ($1 … $17), in order.
    `tuning`: the fields of HybridTuning."""
    t = HybridTuning(**tuning)
    vec = query_vector(query_vec)
    if (t.w_vector if vec is not None else 0.0) + t.w_fulltext <= 0:
        raise ValueError("no active search arm has a positive weight "
                         f"(w_vector={t.w_vector}, w_fulltext={t.w_fulltext}, "
                         f"query vector {'given' if vec is not None else 'absent'})")
    text = clean_text(query_text).text
    return (text, vec, embed_model, t.candidates, float(t.k), float(t.w_vector), float(t.w_fulltext),
            float(t.w_recency), now, t.limit, DF_COUNT_CAP, COMMON_ROWS_CAP, NEWEST_EXACT, float(t.w_context),
            float(t.fts_confidence), float(t.w_own), OWN_EXACT)


def _hit(row: asyncpg.Record) -> SearchHit:
    embedding = row["embedding"]
    metadata = row["metadata"]
    return SearchHit(
        id=row["id"], content=row["content"], compressed=row["compressed"],
        memory_type=row["memory_type"], alpha=row["alpha"], beta=row["beta"],
        immutable=row["immutable"], source_tag=row["source_tag"],
        source_confidence=row["source_confidence"], access_count=row["access_count"],
        last_accessed=row["last_accessed"], access_timestamps=list(row["access_timestamps"]),
        event_time=row["event_time"], created_at=row["created_at"],
        metadata=json.loads(metadata) if isinstance(metadata, str) else metadata,
        embedding=None if embedding is None else embedding.to_numpy().astype(np.float32),
        embed_model=row["embed_model"], similarity=row["similarity"],
        vec_rank=row["vec_rank"], fts_rank=row["fts_rank"], fts_score=row["fts_score"],
        own_rank=row["own_rank"], rrf=row["rrf"], recency=row["recency"], score=row["score"],
        superseded_by=row["superseded_by"], superseded_at=row["superseded_at"],
    )


async def search_hybrid(
    executor: Executor,
    query_text: str | bytes,
    query_vec: np.ndarray | Sequence[float] | None,
    *,
    embed_model: str,
    now: datetime | None = None,
    **tuning: Any,
) -> list[SearchHit]:
    """The best `limit` memories for a question, best first (see the module docstring).

    `query_vec` is the question embedded with RETRIEVAL_QUERY by the model named
    `embed_model`; None (embedder down) searches with the full-text arm alone.
    `now` defaults to the database clock; tests pass it to pin recency. `tuning`: the
    fields of HybridTuning (limit, k, arm weights, candidates).
    """
    args = hybrid_arguments(query_text, query_vec, embed_model=embed_model, now=now, **tuning)
    if not args[0].strip() and args[1] is None:
        return []
    rows = await executor.fetch(HYBRID_SQL, *args)
    return [_hit(row) for row in rows]


async def fetch_hits(
    executor: Executor,
    ids: Sequence[int],
    query_vec: np.ndarray | Sequence[float] | None,
    *,
    embed_model: str,
    now: datetime | None = None,
) -> list[SearchHit]:
    """SearchHits for memories found another way (spreading activation), in `ids` order.

    One query for all ids. Neither arm ranked them: vec_rank/fts_rank are None and
    rrf and score are 0; `similarity` and `recency` are computed as in
    search_hybrid. Unknown ids are left out.
    """
    if not ids:
        return []
    rows = await executor.fetch(FETCH_SQL, list(ids), query_vector(query_vec), embed_model, now)
    return [_hit(row) for row in rows]
