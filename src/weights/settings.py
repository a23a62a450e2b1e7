"""Settings of the safety ceilings (runtime.yaml `weights.safety:`, plan §3.9): pure pydantic.

The ceilings' plan values live here; the pure rules (src/weights/safety_rules.py)
take them as defaults, so config never imports the rules to reach them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

CENTER_CEILING = 0.95
GOAL_BUDGET_SHARE = 0.40
MAX_CENTER_CHANGE = 0.10

Mode = Literal["enforced", "shadow"]


class SafetySettings(BaseModel):
    """runtime.yaml `weights.safety:`. Which phases block, and the limits of each ceiling."""

    model_config = ConfigDict(extra="forbid")

    # hard ceiling, goal budget, diminishing returns, audit trail
    phase_a: Mode = "enforced"
    # rate limiter, Two-Gate guardrail (enforced since consolidation runs; shadow selectable)
    phase_b: Mode = "enforced"
    # entropy monitor, circuit breaker, CBA coherence (when patterns emerge)
    phase_c: Mode = "shadow"
    center_ceiling: float = Field(CENTER_CEILING, gt=0, le=1)
    goal_budget_share: float = Field(GOAL_BUDGET_SHARE, gt=0, le=1)
    max_center_change_per_cycle: float = Field(MAX_CENTER_CHANGE, gt=0, le=1)
    two_gate_min_margin: float = Field(0.0, ge=0)
    two_gate_capacity_cap: float = Field(0.9, gt=0, le=1)
    # a pattern (actor, memory) reinforced this many cycles with no new evidence trips
    circuit_breaker_cycles: int = Field(5, ge=1)
    entropy_window: int = Field(50, ge=2)
    entropy_drop_fraction: float = Field(0.10, gt=0, lt=1)
    # The entropy monitor reads the top `entropy_top_k` memories by center (where a runaway
    # shows: notes.md "Phase C"); an alarm broadens sampling for `broaden_cycles` cycles,
    # Beta draws then resting on at most `broaden_evidence` units (same center, wider).
    entropy_top_k: int = Field(20, ge=2)
    # an entropy alarm (enforced) broadens sampling this many cycles:
    broaden_cycles: int = Field(5, ge=1)
    # Beta draws rest on at most this much evidence (same center, wider)
    broaden_evidence: float = Field(4.0, gt=0)
    coherence_tolerance: float = Field(0.10, gt=0, le=1)
    # A coherence drop (enforced) pauses promotion for this many consolidation cycles.
    promotion_pause_cycles: int = Field(5, ge=1)
    # Circuit-breaker patterns tracked per cycle at most (a cycle never closed, with the
    # monitors off, must not grow without bound).
    max_tracked_patterns: int = Field(10_000, ge=1)


class WeightsSettings(BaseModel):
    """`weights:` in runtime.yaml: how memory weights may change."""

    model_config = ConfigDict(extra="forbid")

    safety: SafetySettings = SafetySettings()   # the ceilings every weight change passes (safety.py)
