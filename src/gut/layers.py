"""The gut's layer weights evolve (plan §5.1: "Layer weights are starting points —
consolidation evolves them"). Each deep pass, after L2 is rebuilt:

    signal_k(delta) = delta · unit(L_k)      for each layer k that exists
                      (delta = attention − subconscious: positive when the focus was
                      closer to layer k than the subconscious is)
    r_k = Pearson(signal_k, outcome valence) over the logged deltas that have a linked
          outcome (§5.3: corrections, feedback, /good, /bad, goals achieved ...)

A layer whose pull preceded good outcomes is under-weighted in what the mind holds, so it
gains: target_k = w_k · exp(learning_rate · r_k), renormalised. r_k counts only when at
least `min_outcomes` deltas have an outcome and its Fisher z, atanh(|r|)·sqrt(n − 3), is at
least `min_z` (otherwise 0: no move). Bounded: each weight moves at most `max_step` a pass
and stays in [floor, cap] (widened to include its starting point), summing to 1.

A layer that does not exist yet (no values or goals at birth) keeps its weight. The step
is written to `gut_layer_weights` with its evidence (src/gut/repository.py); the newest row
is what the running gut uses, also after a restart. Pure: no I/O here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from src.gut.settings import LayerEvolution

LAYERS = ("l0", "l1", "l2")


@dataclass(frozen=True)
class LayerEvidence:
    """What one layer's signal says about outcomes."""

    layer: str
    r: float | None              # None: the layer is missing, or too few outcomes
    n: int                       # deltas with a linked outcome
    z: float | None
    significant: bool


def layer_evidence(deltas: np.ndarray, valences: Sequence[float | None],
                   layers: Sequence[np.ndarray | None], cfg: LayerEvolution) -> list[LayerEvidence]:
    """Per layer, the correlation of its signal with outcome valence (module docstring)."""
    x = np.atleast_2d(np.asarray(deltas, np.float64))
    linked = np.array([v is not None for v in valences], dtype=bool)
    vals = np.array([0.0 if v is None else float(v) for v in valences])
    n = int(linked.sum())
    out = []
    for name, vec in zip(LAYERS, layers, strict=True):
        norm = float(np.linalg.norm(vec)) if vec is not None else 0.0
        if norm == 0.0 or n < 2 or not x.size:
            out.append(LayerEvidence(name, None, n, None, False))
            continue
        signal = x[linked, : vec.shape[0]] @ (np.asarray(vec, np.float64) / norm)
        r = _pearson(signal, vals[linked])
        z = None if r is None or n <= 3 else float(np.arctanh(min(abs(r), 1 - 1e-12)) * np.sqrt(n - 3))
        out.append(LayerEvidence(name, r, n, z, r is not None and n >= cfg.min_outcomes
                                 and z is not None and z >= cfg.min_z))
    return out


def _pearson(a: np.ndarray, b: np.ndarray) -> float | None:
    if len(a) < 2 or np.std(a) == 0 or np.std(b) == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def bounded(weights: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The weights moved into [lo, hi] each and summing to 1 (lo sums ≤ 1 ≤ hi sums): what is
    clipped off or missing is shared by the entries that still have room, in proportion."""
    w = np.clip(np.asarray(weights, np.float64), lo, hi)
    for _ in range(20):
        excess = 1.0 - float(w.sum())
        if abs(excess) < 1e-12:
            break
        room = (w < hi) if excess > 0 else (w > lo)
        share = w[room] / w[room].sum() if w[room].sum() > 0 else np.full(room.sum(), 1.0 / room.sum())
        w[room] = w[room] + excess * share
        w = np.clip(w, lo, hi)
    return w


def evolve(weights: Sequence[float], start: Sequence[float], evidence: Sequence[LayerEvidence],
           cfg: LayerEvolution) -> tuple[float, float, float]:
    """One bounded step (module docstring); the same weights when no layer is significant."""
    w = np.asarray(weights, np.float64)
    r = np.array([e.r if e.significant else 0.0 for e in evidence])
    if not r.any():
        return tuple(float(x) for x in w)
    target = w * np.exp(cfg.learning_rate * r)
    target = target / target.sum()
    stepped = w + np.clip(target - w, -cfg.max_step, cfg.max_step)
    s = np.asarray(start, np.float64)
    lo, hi = np.minimum(cfg.floor, s), np.maximum(cfg.cap, s)
    lo, hi = np.maximum(lo, w - cfg.max_step), np.minimum(hi, w + cfg.max_step)
    return tuple(float(x) for x in bounded(stepped, lo, hi))
