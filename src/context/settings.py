"""Settings of context assembly and the adaptive FIFO (runtime.yaml `context:`, `context.fifo:`;
plan §3.2, §3.3): pure pydantic, imported by config."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Share(_Section):
    """A part of the context window: `share` of it, at least `floor` and at most `cap`
    tokens (`cap` None: no cap)."""

    share: float = Field(ge=0, le=1)
    floor: int = Field(0, ge=0)
    cap: int | None = Field(None, ge=0)

    def of(self, window: int) -> int:
        tokens = max(self.floor, int(self.share * window))
        return tokens if self.cap is None else min(tokens, max(self.cap, self.floor))


Tokens = Annotated[int, Field(ge=0)]


def _tokens(part: Share | int, window: int) -> int:
    return part if isinstance(part, int) else part.of(window)


#: The window of a model that states none (reflex mode, a test double): the plan's 128k.
UNSTATED_WINDOW = 128_000
#: The reply's reserve when neither `output_reserve` nor the model says (its default max tokens).
DEFAULT_REPLY = 1024
_PARTS = ("immutable", "identity_expected", "identity_cap", "situational", "cognitive_state")


class ContextBudget(_Section):
    """Token budget table of plan §3.2, scaled to the model's context window (issue 27).

    Each allocation is a `Share` of the window (a floor, and the plan's figure at 128k as its
    cap) or a fixed number of tokens; the reply keeps `output_reserve` (None: the model's
    max output tokens) and the conversation gets the remainder. `resolve` turns a budget
    into tokens for one window: the model's (`context_window` None) or the one set here.
    When the floors leave the conversation less than `conversation_min`, every allocation
    shrinks in proportion (a window that small is said at start). A model's window larger
    than `window_max` is used up to it only: every call pays for the history it carries, and
    the plan's table is drawn for 128k (Gemini's million tokens would let the conversation
    alone grow to ~800k before the FIFO prunes).

    `identity_expected` is the plan's average (~1500, range ~500–3000): it blocks nothing
    and is reported beside the identity track's tokens in thought_log; `identity_cap` is the
    hard cap of the stochastic track. The conversation's maximum reserves the cap (not the
    average) so the FIFO's maximum does not move with each roll.
    """

    context_window: int | None = Field(None, ge=1)
    # of a larger window only this much is used (every call pays for the history it carries)
    window_max: int | None = Field(UNSTATED_WINDOW, ge=1)
    output_reserve: int | None = Field(None, ge=0)
    # tokens; a part is a number of tokens or {share, floor, cap}
    immutable: Share | Tokens = 100
    identity_expected: Share | Tokens = Share(share=0.05, floor=100, cap=1500)
    identity_cap: Share | Tokens = Share(share=0.10, floor=200, cap=3000)
    situational: Share | Tokens = Share(share=0.15, floor=200, cap=2000)
    cognitive_state: Share | Tokens = Share(share=0.05, floor=100, cap=200)
    # below it (a tiny window) every part gives way in proportion
    conversation_min: int = Field(256, ge=1)

    @model_validator(mode="after")
    def _leaves_room(self) -> ContextBudget:
        if self.context_window is not None and self.output_reserve is not None:
            fixed = self.context_window - self.output_reserve - sum(
                _tokens(getattr(self, p), self.context_window) for p in _PARTS if p != "identity_expected")
            if fixed < 1:
                raise ValueError(
                    f"context_window {self.context_window} leaves no room for the conversation after "
                    f"immutable + identity_cap + situational + cognitive_state + output_reserve "
                    f"= {self.context_window - fixed}; raise context_window")
        return self

    @property
    def resolved(self) -> bool:
        """Whether every allocation is in tokens (after `resolve`)."""
        return (self.context_window is not None and self.output_reserve is not None
                and all(isinstance(getattr(self, p), int) for p in _PARTS))

    def resolve(self, window: int | None = None, reply: int | None = None) -> ContextBudget:
        """This budget in tokens for `window` (this budget's own `context_window` first, else
        `window` up to `window_max`, else `UNSTATED_WINDOW`) and a reply of `reply` tokens
        (`output_reserve` first)."""
        if self.resolved:
            return self
        total = self.context_window or window or UNSTATED_WINDOW
        if self.context_window is None and self.window_max is not None:
            total = min(total, self.window_max)
        out = self.output_reserve if self.output_reserve is not None else (reply or DEFAULT_REPLY)
        parts = {p: _tokens(getattr(self, p), total) for p in _PARTS}
        taken = sum(v for p, v in parts.items() if p != "identity_expected")
        room = total - out - self.conversation_min
        if taken > room:     # a tiny window: every part gives way in proportion
            scale = max(0.0, room) / taken if taken else 0.0
            parts = {p: int(v * scale) for p, v in parts.items()}
        parts["identity_expected"] = min(parts["identity_expected"], parts["identity_cap"])
        return self.model_copy(update={"context_window": total, "output_reserve": out, **parts})

    @property
    def conversation_tokens(self) -> int:
        """The FIFO's maximum: what the fixed allocations leave of the window."""
        b = self.resolve()
        return b.context_window - (b.immutable + b.identity_cap + b.situational  # type: ignore[operator]
                                   + b.cognitive_state + b.output_reserve)


class FifoSettings(BaseModel):
    """`context.fifo:` in runtime.yaml: how the conversation window is pruned (plan §2.10)."""

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
    # a prune goes down to this share of the target: the conversation's start moves, and a
    # server's prompt cache re-reads everything after the system prompt, at most every few
    # turns (0.9 pruned nearly every turn of a long conversation; issue 38)
    low_water: float = Field(0.5, gt=0, le=1)
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
    # recall's best this many lead the situational track, in recall's order and full text:
    # no Beta draw leaves the best match out (src/context/tracks.py); the rest compete
    recall_first: int = Field(2, ge=0)
    compressed_max_chars: int = Field(200, ge=20)
    min_injection_score: float = Field(0.0, ge=0, le=1)
    big_shift: float = Field(0.7, ge=0, le=2)
    inertia_after_big_shift: float = Field(0.05, ge=0, lt=1)
    inertia: float = Field(0.3, ge=0, lt=1)
    record_co_access: bool = True
    fifo: FifoSettings = FifoSettings()   # the conversation window's pruning (src/context/fifo.py)
