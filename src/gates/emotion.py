"""Emotional charge v0.1 (plan §2.8), a placeholder until the two-centroid gut (§5.1).

`gut` is the item's cosine distance from the store centroid, scaled to [0, 1]:

    gut = (1 - cos(item, centroid)) / 2

0 = pointing exactly where the mind's memories point on average (familiar), 0.5 =
orthogonal (unrelated), 1 = pointing away (alien). The centroid is the mean
embedding of every memory of the same embed model; the plan's §5.1 makes it the
"subconscious" centroid, and L2 of it is this importance-free mean.

    emotional_charge = |gut - 0.5| * 2

so charge is |cos(item, centroid)|: strong both for what sits squarely in the mind's
usual territory and for what runs against it, weak for what is merely unrelated.
An empty store has no centroid and every charge is 0.0.

The plan's "+0.15 bonus when > 0.3" is not added to the charge: it is what the charge
does, a bonus on the item's relevance in the exit gate's matrix (src/gates/matrix.py,
`charge_bonus`), for this charge and for the gut's that replaces it (src/gut/centroids.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import asyncpg
import numpy as np

from src.vectors import unit


def gut_signal(vec: np.ndarray, centroid: np.ndarray) -> float:
    """(1 - cos(vec, centroid)) / 2 in [0, 1]; 0.5 when either vector has no direction."""
    # a vector without direction has cosine 0 with everything (src/vectors): gut 0.5
    cos = float(np.clip(unit(vec) @ unit(centroid), -1.0, 1.0))
    return (1.0 - cos) / 2.0


def emotional_charge(vec: np.ndarray, centroid: np.ndarray | None) -> float:
    """|gut - 0.5| * 2 in [0, 1]; 0.0 without a centroid."""
    if centroid is None:
        return 0.0
    # rounded so that a cosine of exactly 0.3 is not pushed over the bonus line (the
    # matrix's `charge_bonus_above`) by floating-point error in the (1 - cos) / 2 round trip
    return round(abs(gut_signal(vec, centroid) - 0.5) * 2.0, 12)


class StoreCentroid:
    """The mean embedding of the store, recomputed at most every `refresh_s` seconds.

    Between recomputations the gate folds in the vectors it persists itself (a
    running mean), so a burst of new memories moves the centroid at once without a
    full scan; other writers are picked up at the next refresh.
    """

    def __init__(self, refresh_s: float = 300.0, clock: Callable[[], float] = time.monotonic):
        self.refresh_s = refresh_s
        self.clock = clock
        self._model: str | None = None
        self._mean: np.ndarray | None = None
        self._count = 0
        self._at = float("-inf")

    async def get(self, db: asyncpg.Pool | asyncpg.Connection, embed_model: str) -> np.ndarray | None:
        """The centroid of `embed_model`'s memories, or None when there are none."""
        if self._model != embed_model or self.clock() - self._at >= self.refresh_s:
            row = await db.fetchrow(
                "SELECT avg(embedding) AS mean, count(*) AS n FROM memories "
                "WHERE embed_model = $1 AND embedding IS NOT NULL", embed_model)
            self._model, self._at, self._count = embed_model, self.clock(), int(row["n"])
            self._mean = None if row["mean"] is None else row["mean"].to_numpy().astype(np.float64)
        return None if self._mean is None else self._mean.astype(np.float32)

    async def recompute(self, db: asyncpg.Pool | asyncpg.Connection, embed_model: str) -> np.ndarray | None:
        """Full recomputation now (after each deep consolidation pass, plan §4.2)."""
        self._at = float("-inf")
        return await self.get(db, embed_model)

    def absorb(self, embed_model: str, vectors: np.ndarray) -> None:
        """Fold newly persisted vectors of `embed_model` into the cached mean."""
        vectors = np.asarray(vectors, dtype=np.float64)
        if self._model != embed_model or not len(vectors):
            return
        total = self._count + len(vectors)
        current = np.zeros(vectors.shape[1]) if self._mean is None else self._mean * self._count
        self._mean = (current + vectors.sum(axis=0)) / total
        self._count = total
