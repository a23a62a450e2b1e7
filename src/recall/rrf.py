"""Reciprocal Rank Fusion and the recency score of hybrid search (plan §2.5).

The hybrid search runs as one SQL statement; these functions are the reference
implementations that statement is tested against, so they follow the SQL's
conventions exactly: ranks start at 1, an id missing from an arm contributes 0
from that arm, and recency uses the plan's literal constant 0.693 (not ln 2).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

import numpy as np

RRF_K = 60

#: Seven days: recency halves every week.
RECENCY_HALF_LIFE_SECONDS = 604800.0
#: The plan's ln 2, to three places, as the SQL writes it.
RECENCY_LN2 = 0.693

Id = TypeVar("Id", bound=Hashable)


def rrf_fuse(
    ranked_lists: Mapping[str, Sequence[Id]],
    k: float = RRF_K,
    weights: Mapping[str, float] | None = None,
    evidence: Mapping[str, Mapping[Id, float]] | None = None,
) -> dict[Id, float]:
    """Fuse ranked lists: score(id) = sum over arms of w_arm · e / (k + rank), rank from 1.

    ``evidence`` (optional) gives an id's factor e in [0, 1] within one arm (missing: 1):
    the full-text arm's confidence in a row, its score against a share of a unique
    word's idf (src/recall/search.py, `fts_confidence`).

    ``ranked_lists`` maps an arm name ("vector", "keyword") to ids best first.
    ``weights`` defaults to 1.0 per arm; when given it must name every arm in
    ``ranked_lists`` (a misspelt arm silently weighted 1.0 would be worse than
    an error). An id repeated within one arm counts once, at its best rank, as
    ``ROW_NUMBER()`` over distinct ids does in SQL.

    Returns scores ordered best first; equal scores keep the order in which ids
    were first met (arm order, then rank).
    """
    if not (math.isfinite(k) and k >= 0):
        raise ValueError(f"RRF k must be a finite number >= 0, got {k!r}")
    if weights is None:
        weights = {arm: 1.0 for arm in ranked_lists}
    else:
        missing = sorted(set(ranked_lists) - set(weights))
        if missing:
            raise ValueError(f"no weight given for arm(s) {', '.join(missing)}")
        negative = sorted(arm for arm in ranked_lists if not weights[arm] >= 0)
        if negative:
            raise ValueError(f"arm weights must be >= 0; got negative for {', '.join(negative)}")

    scores: dict[Id, float] = {}
    for arm, ids in ranked_lists.items():
        w = weights[arm]
        factors = (evidence or {}).get(arm, {})
        seen: set[Id] = set()
        rank = 0
        for item in ids:
            if item in seen:
                continue
            seen.add(item)
            rank += 1
            scores[item] = scores.get(item, 0.0) + w * factors.get(item, 1.0) / (k + rank)
    return dict(sorted(scores.items(), key=lambda kv: -kv[1]))


def recency_score(age_seconds: float | np.ndarray) -> float | np.ndarray:
    """exp(-0.693 * age / 604800): 1.0 now, ~0.5 after a week, ~0.25 after two.

    Negative ages (a clock that ran backwards, a timestamp from another host)
    count as 0, so recency never exceeds 1. Accepts a scalar or an array.
    """
    ages = np.maximum(np.asarray(age_seconds, dtype=float), 0.0)
    scores = np.exp(-RECENCY_LN2 * ages / RECENCY_HALF_LIFE_SECONDS)
    if scores.ndim == 0:
        return float(scores)
    return scores
