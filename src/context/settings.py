"""Settings of context assembly and the adaptive FIFO (runtime.yaml `context:`, `fifo:`;
plan §3.2, §3.3): pure pydantic, imported by config."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ContextBudget(_Section):
    """Token budget table of plan §3.2.

    `identity_expected` is the plan's average (~1500, range ~500–3000): it blocks
    nothing and is reported beside the identity track's tokens in thought_log; `identity_cap` is the hard cap of the stochastic track.
    The conversation gets the remainder, reserving the identity cap (not the
    average) so the FIFO's maximum does not move with each roll.
    """

    context_window: int = Field(128_000, ge=1)
    immutable: int = Field(100, ge=0)
    identity_expected: int = Field(1500, ge=0)
    identity_cap: int = Field(3000, ge=0)
    situational: int = Field(2000, ge=0)
    cognitive_state: int = Field(200, ge=0)
    output_reserve: int = Field(4000, ge=0)

    @model_validator(mode="after")
    def _leaves_room(self) -> ContextBudget:
        if self.conversation_tokens < 1:
            raise ValueError(
                f"context_window {self.context_window} leaves no room for the conversation after "
                f"immutable + identity_cap + situational + cognitive_state + output_reserve "
                f"= {self.context_window - self.conversation_tokens}; raise context_window")
        if self.identity_expected > self.identity_cap:
            raise ValueError(f"identity_expected {self.identity_expected} exceeds identity_cap "
                             f"{self.identity_cap}")
        return self

    @property
    def conversation_tokens(self) -> int:
        """The FIFO's maximum: what the fixed allocations leave of the window."""
        return self.context_window - (self.immutable + self.identity_cap + self.situational
                                      + self.cognitive_state + self.output_reserve)


class ContextSettings(_Section):
    """`context:` in runtime.yaml."""

    budget: ContextBudget = ContextBudget()
    identity_top_n: int = Field(20, ge=0)
    # 0 = the plan's rule. In a young store every memory is Beta(1, 4) (center 0.2) and the
    # "top 20" are simply the oldest 20; 0.5 would admit only memories with at least as
    # much evidence for as against.
    identity_min_center: float = Field(0.0, ge=0, le=1)
    identity_threshold: float = Field(0.6, ge=0, le=1)
    identity_refresh_cycles: int = Field(20, ge=1)
    full_text_ratio: float = Field(0.5, ge=0, le=1)
    compressed_max_chars: int = Field(200, ge=20)
    min_injection_score: float = Field(0.0, ge=0, le=1)
    big_shift: float = Field(0.7, ge=0, le=2)
    inertia_after_big_shift: float = Field(0.05, ge=0, lt=1)
    inertia: float = Field(0.3, ge=0, lt=1)
    record_co_access: bool = True



class FifoSettings(BaseModel):
    """`fifo:` in runtime.yaml."""

    model_config = ConfigDict(extra="forbid")

    w_gate: float = Field(0.25, ge=0)
    w_system2: float = Field(0.25, ge=0)
    w_goal: float = Field(0.25, ge=0)
    w_emotion: float = Field(0.25, ge=0)
    system2_half_life_s: float = Field(600.0, gt=0)
    relaxed_below: float = Field(0.3, ge=0, le=1)
    deep_above: float = Field(0.7, ge=0, le=1)
    relaxed_min_fraction: float = Field(0.3, gt=0, le=1)
    relaxed_max_fraction: float = Field(0.4, gt=0, le=1)
    deep_fraction: float = Field(0.9, gt=0, le=1)
    low_water: float = Field(0.9, gt=0, le=1)
    min_keep: int = Field(1, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> FifoSettings:
        if not self.relaxed_below < self.deep_above:
            raise ValueError(f"relaxed_below {self.relaxed_below} must be below deep_above "
                             f"{self.deep_above}")
        if not self.relaxed_min_fraction <= self.relaxed_max_fraction <= self.deep_fraction:
            raise ValueError("fractions must grow: relaxed_min_fraction <= relaxed_max_fraction "
                             "<= deep_fraction")
        if self.w_gate + self.w_system2 + self.w_goal + self.w_emotion <= 0:
            raise ValueError("at least one intensity weight must be > 0")
        return self

