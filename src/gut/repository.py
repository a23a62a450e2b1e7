"""SQL of the gut: L2 from importance buckets, the delta log, deltas for PCA, gut axes, and
the evolved layer weights (`gut_layer_weights`, src/gut/layers.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np
from pgvector import HalfVector

from src.db.sql import Executor

# One GROUP BY: per bucket of depth-weight center, the mean embedding, the row count and
# the summed centers. Σ_b mean_b·Σw_b / Σw is the importance-weighted mean, exact up to
# the spread of centers inside a bucket (width 1/buckets).
_L2_BUCKETS = """
SELECT avg(embedding) AS mean, count(*) AS n, sum(c) AS w
  FROM (SELECT embedding,
               depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) AS c
          FROM memories
         WHERE embed_model = $1 AND embedding IS NOT NULL) s
 GROUP BY width_bucket(c, 0.0, 1.0000001, $2)
"""

# One cycle's delta and the links of the outcomes that cycle already recorded, in one
# statement. It runs inside the cycle's thought_log transaction (no commit of its own).
_WRITE_DELTA = """
WITH d AS (INSERT INTO gut_deltas (session_id, cycle, delta, magnitude, context, action, source_tag, at)
           VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8)
           RETURNING id),
     l AS (INSERT INTO outcome_links (outcome_id, subject_kind, subject_id)
           SELECT o, 'gut_delta', d.id FROM d CROSS JOIN unnest($9::bigint[]) AS o
           ON CONFLICT DO NOTHING)
SELECT id FROM d
"""

# The newest deltas with the mean valence of the outcomes linked to each (NULL: none yet).
_DELTAS_FOR_PCA = """
SELECT d.id, d.delta,
       (SELECT avg(o.valence) FROM outcome_links l JOIN outcomes o ON o.id = l.outcome_id
         WHERE l.subject_kind = 'gut_delta' AND l.subject_id = d.id) AS valence
  FROM gut_deltas d
 ORDER BY d.id DESC
 LIMIT $1
"""

_STORE_AXES = """
INSERT INTO gut_axes (computed_at, rank, component, explained_variance, outcome_correlation,
                      outcomes_seen, samples, name)
SELECT $1, r, c, ev, oc, os, $7, nm
  FROM unnest($2::smallint[], $3::halfvec[], $4::float8[], $5::float8[], $6::int[], $8::text[])
       AS t(r, c, ev, oc, os, nm)
"""

_LATEST_AXES = """
SELECT rank, component, explained_variance, outcome_correlation, outcomes_seen, name
  FROM gut_axes
 WHERE computed_at = (SELECT max(computed_at) FROM gut_axes)
 ORDER BY rank
"""

# Nearest memory to each axis direction: names an axis by what lies along it.
_NEAREST_MEMORY = """
SELECT content FROM memories
 WHERE embed_model = $2 AND embedding IS NOT NULL
 ORDER BY embedding <=> $1
 LIMIT 1
"""


async def l2_buckets(db: Executor, embed_model: str, buckets: int) -> list[tuple[np.ndarray, int, float]]:
    """[(mean vector, rows, summed centers)] per importance bucket."""
    rows = await db.fetch(_L2_BUCKETS, embed_model, buckets)
    return [(r["mean"].to_numpy().astype(np.float64), int(r["n"]), float(r["w"])) for r in rows
            if r["mean"] is not None]


@dataclass
class DeltaRow:
    """One cycle's gut_deltas row, held until the cycle's transaction writes it."""

    session_id: str | None
    cycle: int | None
    delta: np.ndarray
    magnitude: float
    context: str                              # the attention focus of the cycle
    action: Sequence[Mapping[str, Any]]       # what the cycle did (read when written)
    source_tag: str | None
    at: datetime
    outcome_ids: list[int] = field(default_factory=list)   # outcomes of this cycle to link to it


async def write_delta(db: Executor, row: DeltaRow) -> int:
    """Write one delta (and its outcome links); returns its id. Pass the connection of the
    cycle's transaction: on a pool it commits alone, which is what made it slow (one more
    commit — a WAL flush on a durable server — and a pool round trip per cycle)."""
    return await db.fetchval(_WRITE_DELTA, row.session_id, row.cycle,
                             HalfVector(np.asarray(row.delta, np.float32)), float(row.magnitude),
                             row.context, json.dumps(list(row.action)), row.source_tag, row.at,
                             list(row.outcome_ids))


async def deltas_for_pca(db: Executor, limit: int) -> tuple[list[int], np.ndarray, list[float | None]]:
    """(ids, deltas matrix, mean outcome valence or None) of the newest `limit` deltas."""
    rows = await db.fetch(_DELTAS_FOR_PCA, limit)
    if not rows:
        return [], np.zeros((0, 768)), []
    matrix = np.stack([r["delta"].to_numpy().astype(np.float64) for r in rows])
    return [r["id"] for r in rows], matrix, [None if r["valence"] is None else float(r["valence"])
                                             for r in rows]


async def store_axes(db: Executor, computed_at: datetime, axes: Sequence[Any], samples: int) -> None:
    """Write one deep pass's axes in one statement."""
    await db.execute(_STORE_AXES, computed_at, [a.rank for a in axes],
                     [HalfVector(a.component.astype(np.float32)) for a in axes],
                     [a.explained_variance for a in axes], [a.correlation for a in axes],
                     [a.outcomes_seen for a in axes], samples, [a.name for a in axes])


async def latest_axes(db: Executor) -> list[asyncpg.Record]:
    return await db.fetch(_LATEST_AXES)


async def nearest_memory(db: Executor, direction: np.ndarray, embed_model: str) -> str | None:
    return await db.fetchval(_NEAREST_MEMORY, HalfVector(np.asarray(direction, np.float32)), embed_model)


async def latest_layer_weights(db: Executor) -> tuple[float, float, float] | None:
    """The layer weights the last evolution step left (src/gut/layers.py); None: never evolved."""
    row = await db.fetchrow("SELECT l0, l1, l2 FROM gut_layer_weights ORDER BY id DESC LIMIT 1")
    return None if row is None else (float(row["l0"]), float(row["l1"]), float(row["l2"]))


async def record_layer_weights(db: Executor, at: datetime, before: Sequence[float], after: Sequence[float],
                               evidence: Mapping[str, Any]) -> None:
    """One evolution step with what moved it."""
    await db.execute(
        """INSERT INTO gut_layer_weights (at, l0, l1, l2, before, evidence)
           VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb)""",
        at, *[float(x) for x in after], json.dumps(dict(zip(("l0", "l1", "l2"), before, strict=True))),
        json.dumps(dict(evidence), default=str))
