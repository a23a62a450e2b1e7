"""Settings of consolidation part 2 (plan §4.3–§4.6): runtime.yaml `consolidation.evolution:`.

Pure pydantic, no feature imports. Every field has a default, so the section may be
left out. Time spans are in days because the plan states its rules in days. The section
predates the split by stage and keeps its keys: besides the evolution phases of this
package it configures three phases of ../deep/ (reconsolidation, temporal replay,
contextual retrieval), which read it from here.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PromotionSettings(_Section):
    """§4.3: a pattern seen often enough over long enough is reinforced toward a tier."""

    goal_sightings: int = Field(5, ge=1)
    goal_span_days: float = Field(14.0, ge=0)
    goal_amount: float = Field(2.0, gt=0)
    identity_sightings: int = Field(10, ge=1)
    identity_span_days: float = Field(30.0, ge=0)
    identity_amount: float = Field(5.0, gt=0)
    # Operator approval for a promotion whose center would pass this while trust is low.
    approval_center: float = Field(0.85, gt=0, le=1)
    trust_level: int = Field(0, ge=0)
    trust_level_autonomous: int = Field(3, ge=1)
    # Two-Gate capacity: how many memories each tier may hold (centers at or above
    # the tier's center); a promotion that would exceed `two_gate_capacity_cap` of it fails.
    goal_center: float = Field(0.6, gt=0, lt=1)
    identity_center: float = Field(0.8, gt=0, lt=1)
    goal_capacity: int = Field(500, ge=1)
    identity_capacity: int = Field(100, ge=1)
    # Where a promotion leads (§4.3: goal range ~0.6–0.7, identity ~0.8+): the center it
    # climbs to over passes, at most the rate limit per pass (see promotion.py).
    goal_target: float = Field(0.65, gt=0, lt=1)
    identity_target: float = Field(0.82, gt=0, lt=1)
    max_per_pass: int = Field(50, ge=0)
    # Demotion: promoted (or goal-range) memories unreinforced this long get contradict().
    demotion_idle_days: float = Field(30.0, gt=0)
    demotion_every_days: float = Field(7.0, gt=0)
    demotion_amount: float = Field(0.5, gt=0)
    demotion_min_center: float = Field(0.15, ge=0, lt=1)
    max_demotions_per_pass: int = Field(1000, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> PromotionSettings:
        if self.identity_sightings < self.goal_sightings:
            raise ValueError("identity_sightings must be at least goal_sightings")
        if self.identity_center < self.goal_center:
            raise ValueError("identity_center must be at least goal_center")
        if not (self.goal_center <= self.goal_target < self.identity_center <= self.identity_target):
            raise ValueError("need goal_center <= goal_target < identity_center <= identity_target")
        return self


class DecaySettings(_Section):
    """§4.4: not accessed for `idle_days` and fewer than `max_access_count` accesses."""

    idle_days: float = Field(90.0, gt=0)
    max_access_count: int = Field(3, ge=1)
    amount: float = Field(1.0, gt=0)
    max_per_pass: int = Field(20000, ge=0)


class ReconsolidationSettings(_Section):
    """§4.4: new memories that contradict a stored insight; insights whose sources changed."""

    lookback_days: float = Field(7.0, gt=0)
    similarity: float = Field(0.7, ge=-1, le=1)
    max_new_memories: int = Field(500, ge=0)
    max_conflicts: int = Field(5, ge=0)
    max_reevaluations: int = Field(5, ge=0)
    superseded_contradict: float = Field(1.0, gt=0)


class ReplaySettings(_Section):
    """§4.4 temporal chain replay: consecutive episodic memories within `max_gap_minutes`."""

    lookback_days: float = Field(2.0, gt=0)
    max_gap_minutes: float = Field(30.0, gt=0)
    max_pairs: int = Field(5000, ge=0)


class GateTuningSettings(_Section):
    """§4.5: evidence windows, thresholds, steps and bounds of each tuned parameter."""

    min_evidence: int = Field(20, ge=1)
    never_retrieved_days: float = Field(14.0, gt=0)
    window_days: float = Field(30.0, gt=0)
    near_duplicate_similarity: float = Field(0.85, ge=-1, le=1)
    max_drops_checked: int = Field(500, ge=0)
    max_persists_checked: int = Field(5000, ge=0)
    # Too aggressive when this share of dropped content was needed later.
    aggressive_rate: float = Field(0.10, gt=0, lt=1)
    # Too permissive when this share of persisted memories was never retrieved.
    permissive_rate: float = Field(0.80, gt=0, lt=1)
    noise_floor: tuple[float, float, float] = (0.01, 0.20, 0.01)          # lo, hi, step
    short_skip_rate: tuple[float, float, float] = (0.70, 0.99, 0.02)
    mechanical_skip_rate: tuple[float, float, float] = (0.60, 0.98, 0.02)
    scratch_ttl_hours: tuple[float, float, float] = (6.0, 72.0, 4.0)

    @model_validator(mode="after")
    def _bounds(self) -> GateTuningSettings:
        for name in ("noise_floor", "short_skip_rate", "mechanical_skip_rate", "scratch_ttl_hours"):
            lo, hi, step = getattr(self, name)
            if not (lo < hi and step > 0):
                raise ValueError(f"gate tuning {name}: need lo < hi and step > 0, got {lo}, {hi}, {step}")
        return self


class DirichletSettings(_Section):
    """§4.5: alphas move toward the component that predicted use (see dirichlet_evolution)."""

    outcome_window_days: float = Field(3.0, gt=0)
    min_outcomes: int = Field(20, ge=1)
    learning_rate: float = Field(0.5, gt=0)
    factor_min: float = Field(0.5, gt=0)
    factor_max: float = Field(2.0, gt=0)
    max_outcomes: int = Field(20000, ge=1)
    keep_scored_days: float = Field(30.0, gt=0)
    # Beta parameters beyond this are pathological (logged, never changed here).
    pathological_evidence: float = Field(1000.0, gt=0)

    @model_validator(mode="after")
    def _bounds(self) -> DirichletSettings:
        if not self.factor_min <= 1.0 <= self.factor_max:
            raise ValueError("Dirichlet factor bounds must include 1.0 (factor_min <= 1 <= factor_max)")
        return self


class UtilitySettings(_Section):
    """Q-value utility: Q <- Q + eta (r - Q); r = +1 drawn on, -1 said to be wrong,
    `unused_reward` recalled and left alone (see utility.py)."""

    learning_rate: float = Field(0.1, gt=0, le=1)
    unused_reward: float = Field(-0.25, ge=-1, le=0)


class ContextualSettings(_Section):
    """§4.6: batched "who, when, why" context for memories lacking it."""

    batch_size: int = Field(10, ge=1)
    max_calls_per_pass: int = Field(5, ge=0)
    session_neighbours: int = Field(3, ge=0)
    memory_chars: int = Field(600, ge=50)
    context_chars: int = Field(300, ge=50)


class EvolutionSettings(_Section):
    """`evolution:` in runtime.yaml."""

    promotion: PromotionSettings = PromotionSettings()
    decay: DecaySettings = DecaySettings()
    reconsolidation: ReconsolidationSettings = ReconsolidationSettings()
    replay: ReplaySettings = ReplaySettings()
    gate_tuning: GateTuningSettings = GateTuningSettings()
    dirichlet: DirichletSettings = DirichletSettings()
    utility: UtilitySettings = UtilitySettings()
    contextual: ContextualSettings = ContextualSettings()


def evolution_of(ctx: object) -> EvolutionSettings:
    """The `evolution` section carried by a deep pass's settings (defaults when absent)."""
    found = getattr(getattr(ctx, "settings", None), "evolution", None)
    return found if isinstance(found, EvolutionSettings) else EvolutionSettings()
