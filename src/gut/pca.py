"""Gut axes (plan §5.1, §5.3): PCA over logged deltas, correlated with outcomes. Pure.

The top components of the logged deltas are the directions along which the mind's gut
varies most. Each axis is correlated (Pearson r) with the valence of the outcomes linked
back to the deltas (§5.3): a positive r means deltas pointing along the axis preceded
good outcomes (hope), a negative r bad ones (fear). An axis gets a name only once it has
acquired that meaning (enough linked outcomes, |r| above a threshold); the name adds the
memory that lies along its direction, which the caller looks up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class GutAxis:
    rank: int                      # 1 = most variance
    component: np.ndarray          # unit vector (768-d); its positive end leads to good outcomes
    explained_variance: float      # share of the deltas' variance, in [0, 1]
    correlation: float | None      # Pearson r of projection vs outcome valence (>= 0 once oriented)
    outcomes_seen: int             # deltas with a linked outcome
    name: str | None = None        # set by the caller once `meaningful`
    meaningful: bool = False       # enough outcomes and |r| high enough to name the axis


def principal_axes(deltas: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(components k×d as unit rows, explained variance ratios) of the centered deltas."""
    x = np.asarray(deltas, np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"PCA needs at least 2 deltas, got shape {x.shape}")
    centered = x - x.mean(axis=0)
    _, s, vt = np.linalg.svd(centered, full_matrices=False)
    var = s ** 2
    total = float(var.sum())
    k = min(k, vt.shape[0])
    ratios = var[:k] / total if total > 0 else np.zeros(k)
    return vt[:k], ratios


def _pearson(a: np.ndarray, b: np.ndarray) -> float | None:
    if len(a) < 2 or np.std(a) == 0 or np.std(b) == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def significant(r: float, n: int, min_z: float) -> bool:
    """Fisher z test of r > 0 over n pairs: atanh(r)·sqrt(n − 3) >= min_z. With up to 20
    axes tested per pass, min_z = 3 keeps chance correlations from naming an axis
    (about Bonferroni 0.05 / 20)."""
    if n <= 3 or r >= 1.0:
        return n > 3
    return float(np.arctanh(r)) * float(np.sqrt(n - 3)) >= min_z


def gut_axes(deltas: np.ndarray, valences: Sequence[float | None], k: int, *,
             min_outcomes: int = 5, min_correlation: float = 0.3, min_z: float = 3.0) -> list[GutAxis]:
    """The top-k gut axes, each oriented so its positive end goes with good outcomes.

    SVD signs are arbitrary, so each component is flipped to make its correlation with
    outcome valence non-negative: the positive end is then "hope" (what preceded good
    outcomes), the negative end "fear". Without linked outcomes the orientation makes the
    largest coordinate positive, which at least keeps it stable between passes.
    """
    components, ratios = principal_axes(deltas, k)
    x = np.asarray(deltas, np.float64)
    centered = x - x.mean(axis=0)
    linked = np.array([v is not None for v in valences], dtype=bool)
    vals = np.array([0.0 if v is None else float(v) for v in valences])
    out = []
    for i, (comp, ratio) in enumerate(zip(components, ratios, strict=True)):
        proj = centered @ comp
        r = _pearson(proj[linked], vals[linked]) if linked.sum() >= 2 else None
        if (r is not None and r < 0) or (r is None and comp[np.argmax(np.abs(comp))] < 0):
            comp = -comp
            r = None if r is None else -r
        n = int(linked.sum())
        meaningful = (r is not None and n >= min_outcomes and r >= min_correlation
                      and significant(r, n, min_z))
        out.append(GutAxis(i + 1, comp, float(ratio), r, int(linked.sum()), meaningful=meaningful))
    return out
