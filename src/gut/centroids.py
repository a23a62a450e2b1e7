"""The gut's pure math (plan §5.1): centroids, delta, charge and alignment. No I/O.

    subconscious = l0·mean_w(L0) + l1·mean_w(L1) + l2·L2       (L2: importance-weighted
                                                                mean of all memories)
    attention    = recency-weighted mean of the current focus vectors
    delta        = attention − subconscious      magnitude = |delta|, direction = delta/|delta|
    intensity    = min(1, magnitude / magnitude_scale)

A layer with no entries (bootstrap: no values, no goals) drops out and the remaining
layer weights are renormalised, so a newborn mind's subconscious is its L2 alone.
Every vector is L2-normalised before it is averaged: models differ in norm, and only
direction carries meaning for cosine-based embeddings.

Charge of an item (what the exit gate and attention use):

    charge = max(|cos(item, subconscious)|, intensity · |cos(item, direction)|)

strong for what sits squarely in (or squarely against) the mind's usual territory, and
for what bears on the current pull of its gut; weak for what is merely unrelated. This
keeps v0.1's reading of "charge" (§2.8) and adds the two-centroid delta to it.

Alignment of a memory (relevance's emotional component, §3.1):

    alignment = 0.5 + 0.5 · intensity · cos(memory, direction)        in [0, 1]

neutral 0.5 without a gut feeling; memories along the gut's pull rise above it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from src.vectors import has_direction, unit, unit_rows


def direction(vec: np.ndarray | None) -> np.ndarray | None:
    """`vec` as a unit vector (src/vectors' one rule), or None when it has no direction
    (zero or not finite): the gut reads "no direction" as "nothing felt", not as zeros."""
    return unit(vec) if vec is not None and has_direction(vec) else None


def weighted_mean(pairs: Sequence[tuple[np.ndarray, float]]) -> np.ndarray | None:
    """Weighted mean of unit vectors; None when empty or all weights are 0."""
    rows, weights = [], []
    for vec, w in pairs:
        u = direction(vec)
        if u is not None and w > 0:
            rows.append(u)
            weights.append(float(w))
    if not rows:
        return None
    w = np.asarray(weights)
    return (np.stack(rows) * w[:, None]).sum(axis=0) / w.sum()


def subconscious_centroid(l0: np.ndarray | None, l1: np.ndarray | None, l2: np.ndarray | None,
                          weights: tuple[float, float, float] = (0.5, 0.25, 0.25)) -> np.ndarray | None:
    """l0·L0 + l1·L1 + l2·L2 over the layers that exist (weights renormalised); None if none."""
    parts = [(v, w) for v, w in zip((l0, l1, l2), weights, strict=True) if v is not None and w > 0]
    if not parts:
        return None
    total = sum(w for _, w in parts)
    return sum(np.asarray(v, np.float64) * (w / total) for v, w in parts)


def attention_centroid(focus_newest_first: Sequence[np.ndarray], decay: float = 0.5) -> np.ndarray | None:
    """Recency-weighted mean of the focus vectors: the k-th newest weighs decay**k."""
    return weighted_mean([(v, decay ** k) for k, v in enumerate(focus_newest_first)])


@dataclass(frozen=True)
class GutReading:
    """One gut feeling: the delta and what it amounts to."""

    delta: np.ndarray              # attention − subconscious (768-d)
    magnitude: float               # |delta|: motivational intensity, unscaled
    intensity: float               # min(1, magnitude / scale)
    direction: np.ndarray | None   # delta / |delta|: motivational valence; None if no delta
    subconscious: np.ndarray | None

    @property
    def felt(self) -> bool:
        return self.direction is not None


def read_gut(attention: np.ndarray | None, subconscious: np.ndarray | None,
             magnitude_scale: float = 1.0) -> GutReading | None:
    """The delta between the two centroids; None when either centroid is missing."""
    if attention is None or subconscious is None:
        return None
    delta = np.asarray(attention, np.float64) - np.asarray(subconscious, np.float64)
    magnitude = float(np.linalg.norm(delta))
    return GutReading(delta, magnitude, min(1.0, magnitude / magnitude_scale), direction(delta),
                      direction(subconscious))


def charge(vec: np.ndarray, reading: GutReading | None, subconscious: np.ndarray | None = None) -> float:
    """Emotional charge of one item in [0, 1] (see the module docstring); 0.0 with no gut."""
    u = direction(vec)
    sub = reading.subconscious if reading is not None else direction(subconscious)
    if u is None or sub is None:
        return 0.0
    value = abs(float(u @ sub))
    if reading is not None and reading.direction is not None:
        value = max(value, reading.intensity * abs(float(u @ reading.direction)))
    return float(min(1.0, value))


def alignment(vecs: np.ndarray, reading: GutReading | None) -> np.ndarray:
    """Emotional alignment of each row of `vecs` in [0, 1]; 0.5 everywhere with no gut."""
    matrix = np.atleast_2d(np.asarray(vecs, np.float64))
    out = np.full(matrix.shape[0], 0.5)
    if reading is None or reading.direction is None or not matrix.size:
        return out
    cos = unit_rows(matrix) @ reading.direction       # a zero row: cosine 0, alignment 0.5
    return np.clip(0.5 + 0.5 * reading.intensity * cos, 0.0, 1.0)


def describe_intensity(intensity: float) -> str:
    """A word for how strong the gut feeling is."""
    if intensity < 0.25:
        return "calm"
    if intensity < 0.5:
        return "a mild pull"
    if intensity < 0.75:
        return "a strong pull"
    return "an intense pull"
