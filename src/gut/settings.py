"""Settings of the gut (plan §5.1): the `gut:` section of runtime.yaml. Pure, no feature imports."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, model_validator


class LayerWeights(BaseModel):
    """Subconscious centroid = l0·L0 + l1·L1 + l2·L2 (plan: 0.5 / 0.25 / 0.25).

    Starting points: each deep pass evolves them within `layer_evolution`'s bounds (§5.1,
    src/gut/layers.py); the evolved ones are kept in `gut_layer_weights`. They must sum to 1.
    """

    model_config = ConfigDict(extra="forbid")

    l0: float = Field(0.5, ge=0)
    l1: float = Field(0.25, ge=0)
    l2: float = Field(0.25, ge=0)

    @model_validator(mode="after")
    def _sum_to_one(self) -> LayerWeights:
        total = self.l0 + self.l1 + self.l2
        if not math.isclose(total, 1.0, abs_tol=1e-9):
            raise ValueError(f"gut.layer_weights must sum to 1, they sum to {total:g}")
        return self


class LayerEvolution(BaseModel):
    """How a deep pass moves the layer weights (src/gut/layers.py): the layer whose pull
    preceded good outcomes gains, w_k ← w_k·exp(learning_rate·r_k), renormalised; r_k only
    when significant; each weight moves at most `max_step` a pass and stays in [floor, cap]
    (widened to include its starting point when that lies outside)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    learning_rate: float = Field(0.5, gt=0)
    min_outcomes: int = Field(20, ge=4)          # deltas with a linked outcome
    min_z: float = Field(2.0, ge=0)              # Fisher z of |r|: chance correlations do not move it
    max_step: float = Field(0.05, gt=0, le=1)
    floor: float = Field(0.1, ge=0, lt=1)
    # moves them toward the layer whose pull preceded good outcomes (src/gut/layers.py)
    cap: float = Field(0.7, gt=0, le=1)

    @model_validator(mode="after")
    def _bounds(self) -> LayerEvolution:
        if not 3 * self.floor <= 1.0 <= 3 * self.cap:
            raise ValueError("gut.layer_evolution: three weights in [floor, cap] must be able to sum to 1")
        return self


class GutSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    layer_weights: LayerWeights = LayerWeights()
    layer_evolution: LayerEvolution = LayerEvolution()
    # attention centroid: weight of the k-th most recent focus vector = recency_decay**k
    recency_decay: float = Field(0.5, gt=0, le=1)
    # intensity = min(1, |delta| / magnitude_scale); the delta of two means of unit vectors
    magnitude_scale: float = Field(1.0, gt=0)
    # L2 (importance-weighted mean of all memories) is rebuilt in the deep pass from this
    # many buckets of depth-weight center (one GROUP BY, no vectors leave the database)
    importance_buckets: int = Field(20, ge=1, le=1000)
    # a reading at or above this intensity becomes `gut` input for the loop ...
    signal_threshold: float = Field(0.7, ge=0, le=1)
    # ... at most once per this many cycles, and never from a cycle a gut signal won
    signal_cooldown_cycles: int = Field(10, ge=1)
    # ... and only when unusual: magnitude > mean + sigmas·std of the last readings
    signal_sigmas: float = Field(2.0, ge=0)
    signal_baseline_window: int = Field(50, ge=2)
    signal_min_readings: int = Field(10, ge=2)
    context_chars: int = Field(500, ge=20)   # attention focus kept with each logged delta
    # PCA in the deep pass (10–20 gut axes)
    pca_axes: int = Field(12, ge=1, le=50)
    pca_max_samples: int = Field(5000, ge=10)
    pca_min_samples: int = Field(20, ge=3)
    # an axis is named once its projection correlates with outcomes this strongly ...
    name_min_correlation: float = Field(0.3, ge=0, le=1)
    # ... over at least this many deltas with a linked outcome
    name_min_outcomes: int = Field(5, ge=2)
    # ... and significantly: Fisher z of the correlation at least this (chance axes stay unnamed)
    name_min_z: float = Field(3.0, ge=0)
