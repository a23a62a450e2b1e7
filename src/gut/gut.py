"""The gut of one running mind (plan §5.1): centroids kept incrementally, one reading per cycle.

L2 (the importance-weighted mean of all memories) is rebuilt from the database only in
the deep pass (`recompute_l2`, one GROUP BY); between passes the memories the exit gate
persists are folded in (`absorb`), so a cycle never scans the store. L0/L1 come from the
embedded layer files and are refreshed by the loop every cycle (cheap: cached). A reading
is then a few 768-d dot products: a cost that does not grow with the store.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from src.gut import centroids as c
from src.gut import repository as repo
from src.gut.prompts import gut_signal
from src.gut.settings import GutSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NamedAxis:
    """A gut axis from the last deep pass, as the per-cycle summary needs it."""

    rank: int
    component: np.ndarray
    name: str | None
    correlation: float | None


class Gut:
    """Subconscious and attention centroids, the delta, charge and alignment for one mind."""

    def __init__(self, settings: GutSettings | None = None):
        self.settings = settings or GutSettings()
        self._l2_sum: np.ndarray | None = None     # Σ importance·unit(v)
        self._l2_weight = 0.0                      # Σ importance
        self._l0: np.ndarray | None = None
        self._l1: np.ndarray | None = None
        self._sub: np.ndarray | None = None        # cached subconscious centroid
        self._sub_dirty = True
        self._unusual = False
        self.model: str | None = None
        self.reading: c.GutReading | None = None   # the current gut feeling
        self.axes: list[NamedAxis] = []
        self._magnitudes: deque[float] = deque(maxlen=self.settings.signal_baseline_window)
        lw = self.settings.layer_weights
        # l0, l1, l2 of the subconscious: the settings' starting points until consolidation
        # evolves them (src/gut/layers.py; read back from the database by `recompute_l2`)
        self.layer_weights: tuple[float, float, float] = (lw.l0, lw.l1, lw.l2)

    # -- the subconscious ------------------------------------------------------------
    async def recompute_l2(self, db, embed_model: str) -> int:
        """Rebuild L2 from every memory of `embed_model` (deep pass, start-up) and read the
        evolved layer weights, the other part of the subconscious the database holds;
        returns rows seen."""
        evolved = await repo.latest_layer_weights(db)
        if evolved is not None and evolved != self.layer_weights:
            self.layer_weights = evolved
            self._sub_dirty = True
        buckets = await repo.l2_buckets(db, embed_model, self.settings.importance_buckets)
        total = np.zeros(768)
        weight, rows = 0.0, 0
        for mean, n, w in buckets:
            # avg() of unit vectors is not unit; the bucket's rows are unit, so its mean
            # times Σw is Σ w·v up to the spread of w inside the bucket
            total = total + mean[: total.shape[0]] * w
            weight += w
            rows += n
        self.model = embed_model
        self._l2_sum, self._l2_weight = (total, weight) if weight > 0 else (None, 0.0)
        self._sub_dirty = True
        return rows

    def absorb(self, embed_model: str, vectors: np.ndarray, importance: Sequence[float] | float = 0.2) -> None:
        """Fold newly persisted memories into L2 (default importance: a new memory's 0.2)."""
        vecs = np.atleast_2d(np.asarray(vectors, np.float64))
        if not vecs.size or (self.model is not None and embed_model != self.model):
            return
        self.model = embed_model
        norms = np.linalg.norm(vecs, axis=1)
        keep = norms > 0
        weights = np.broadcast_to(np.asarray(importance, np.float64), (vecs.shape[0],))[keep]
        add = (vecs[keep] / norms[keep, None] * weights[:, None]).sum(axis=0)
        self._l2_sum = add if self._l2_sum is None else self._l2_sum + add
        self._l2_weight += float(weights.sum())
        self._sub_dirty = True

    def set_layers(self, values: Sequence[tuple[np.ndarray, float]], goals: Sequence[tuple[np.ndarray, float]]) -> None:
        """L0 (values) and L1 (goals) as (vector, weight) pairs; empty at bootstrap."""
        l0, l1 = c.weighted_mean(values), c.weighted_mean(goals)
        same = (_same(l0, self._l0) and _same(l1, self._l1))
        self._l0, self._l1 = l0, l1
        self._sub_dirty = self._sub_dirty or not same

    def layers(self) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
        """L0, L1 and L2 as the subconscious weighs them (None: the layer has no entries)."""
        l2 = None if self._l2_sum is None else self._l2_sum / self._l2_weight
        return self._l0, self._l1, l2

    def set_layer_weights(self, weights: tuple[float, float, float]) -> None:
        """The weights an evolution step chose (src/gut/deep_pass.py)."""
        self.layer_weights = tuple(float(w) for w in weights)
        self._sub_dirty = True

    def subconscious(self) -> np.ndarray | None:
        """l0·L0 + l1·L1 + l2·L2 (`layer_weights`: 0.5 / 0.25 / 0.25 until evolved; missing
        layers drop out)."""
        if self._sub_dirty:
            self._sub = c.subconscious_centroid(*self.layers(), self.layer_weights)
            self._sub_dirty = False
        return self._sub

    # -- one reading per cycle -------------------------------------------------------
    def read(self, focus_newest_first: Sequence[np.ndarray]) -> c.GutReading | None:
        """Take this cycle's gut reading from the current focus vectors (newest first)."""
        attention = c.attention_centroid(focus_newest_first, self.settings.recency_decay)
        self.reading = c.read_gut(attention, self.subconscious(), self.settings.magnitude_scale)
        self._unusual = False
        if self.reading is not None:
            history = self._magnitudes
            if len(history) >= self.settings.signal_min_readings:
                mean, std = float(np.mean(history)), float(np.std(history))
                self._unusual = self.reading.magnitude > mean + self.settings.signal_sigmas * std
            history.append(self.reading.magnitude)
        return self.reading

    def charge(self, vec: np.ndarray | None) -> float:
        """Emotional charge of an item against the current gut (0.0 when there is none)."""
        if vec is None:
            return 0.0
        return c.charge(vec, self.reading, self.subconscious())

    def alignment(self, vecs: np.ndarray) -> np.ndarray:
        """Relevance's emotional component for each row of `vecs` (0.5 = neutral)."""
        return c.alignment(vecs, self.reading)

    def axis_positions(self) -> list[tuple[NamedAxis, float]]:
        """Where the current delta sits on each named axis (positive = the hope end)."""
        if self.reading is None:
            return []
        return [(a, float(self.reading.delta @ a.component)) for a in self.axes if a.name]

    def summary(self) -> str:
        """The short gut line for System 1's context (plan §5.1: 'inject into System 1')."""
        r = self.reading
        if r is None:
            return ""
        line = f"[GUT] {c.describe_intensity(r.intensity)} (intensity {r.intensity:.2f})"
        placed = sorted(self.axis_positions(), key=lambda p: -abs(p[1]))
        if placed:
            axis, pos = placed[0]
            end = "hope" if pos >= 0 else "fear"
            line += f"; leaning toward {end} on axis {axis.rank} ({axis.name}, {pos:+.2f})"
        return line

    def wants_signal(self, cycles_since_signal: int, winner_source: str) -> bool:
        """Whether this reading should become `gut` input for the loop (§5.1): intense
        (>= `signal_threshold`) *and* unusual for this mind (magnitude above the mean of
        the recent readings by `signal_sigmas` standard deviations) — with unrelated
        embeddings near-orthogonal, a large delta alone is the normal case, not a signal."""
        r = self.reading
        return (r is not None and r.intensity >= self.settings.signal_threshold and self._unusual
                and winner_source != "gut" and cycles_since_signal >= self.settings.signal_cooldown_cycles)

    def signal_text(self, source: str) -> str:
        """What a gut signal says: how strong, and what it arose from (the attended input's
        source, not its words: src/gut/prompts.py)."""
        r = self.reading
        return gut_signal(c.describe_intensity(r.intensity), r.intensity, source)


def _same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and bool(np.array_equal(a, b))
