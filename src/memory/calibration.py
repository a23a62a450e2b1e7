"""The arithmetic of `python -m src.memory calibrate` (src/memory/calibrate.py). Pure.

A new embed model's cosines live on its own scale (notes.md "Thresholds per embedder"), so
its thresholds are carried over from a reference model whose thresholds were measured, by
quantile matching on the same pairs of texts: for a reference threshold t, the share s of
pairs whose reference cosine is at least t; the proposal is the cosine the new model reaches
on that same share s of those pairs. Each value then keeps the reference's trade-off on this
store (what it lets through of these pairs), which is how MiniLM's own values were chosen
from wordllama's. The mapping is monotone, so the order the settings require (novel ≤
confirming, theme ≤ merge) is kept.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import numpy as np

_PUNCT = re.compile(r"[.,;:!?]+$")


def perturbed(text: str, rng: random.Random) -> str:
    """`text` said again a little differently: one word in five dropped (at random places),
    the first letter's case flipped and closing punctuation removed. Meant as a near-duplicate:
    the same fact, as a user restating it or a consolidation merge would see it."""
    words = text.split()
    drop = set(rng.sample(range(len(words)), len(words) // 5)) if len(words) >= 5 else set()
    kept = [w for i, w in enumerate(words) if i not in drop] or words
    out = _PUNCT.sub("", " ".join(kept)) or " ".join(kept)
    return out[0].swapcase() + out[1:]


def pair_cosines(originals: np.ndarray, copies: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(near, other): the cosine of each memory with its perturbed copy, and of every pair of
    different memories (i < j). Rows are unit vectors, so a dot product is the cosine."""
    near = np.einsum("ij,ij->i", originals, copies)
    gram = originals @ originals.T
    upper = np.triu_indices(len(originals), k=1)
    return near.astype(np.float64), gram[upper].astype(np.float64)


@dataclass(frozen=True)
class Distribution:
    """The cosines of one model on the sample's pairs."""

    near: np.ndarray
    other: np.ndarray

    @property
    def pooled(self) -> np.ndarray:
        return np.concatenate([self.near, self.other])

    def summary(self) -> str:
        """One line: where near-duplicates and the other pairs sit, and how much they overlap."""
        n, o = self.near, self.other
        overlap = float(np.mean(o >= np.quantile(n, 0.1))) if len(n) and len(o) else 0.0
        return (f"near-duplicates p10 {np.quantile(n, 0.1):.3f} p50 {np.median(n):.3f}; "
                f"other pairs p50 {np.median(o):.3f} p95 {np.quantile(o, 0.95):.3f} "
                f"p99 {np.quantile(o, 0.99):.3f}; other pairs above the near-duplicates' p10: {overlap:.2%}")


def matched(threshold: float, reference: np.ndarray, new: np.ndarray) -> float:
    """The cosine of the new model that as large a share of the same pairs reaches as reach
    `threshold` with the reference; clamped to the new model's observed range."""
    share = float(np.mean(reference >= threshold))
    if share <= 0.0:
        return float(np.max(new))
    if share >= 1.0:
        return float(np.min(new))
    return float(np.quantile(new, 1.0 - share))


def propose(values: dict[str, float], reference: Distribution, new: Distribution) -> dict[str, float]:
    """Each reference value carried to the new model (two decimals, within (0, 1])."""
    ref, mine = reference.pooled, new.pooled
    return {name: round(min(1.0, max(0.01, matched(t, ref, mine))), 2) for name, t in values.items()}
