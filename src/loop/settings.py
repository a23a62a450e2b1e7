"""Settings of the loop and of attention allocation (runtime.yaml `loop:`, `loop.attention:`;
plan §3.4, §3.10): pure pydantic, imported by config."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Source = Literal["user", "dmn", "consolidation", "gut", "scheduled"]

DEFAULT_URGENCY: Mapping[Source, float] = {
    "user": 0.8, "dmn": 0.2, "gut": 0.4, "consolidation": 0.3, "scheduled": 0.6,
}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SalienceWeights(_Section):
    """The plan's weights; they must sum to 1 so salience stays in [0, 1]."""

    novelty: float = Field(0.3, ge=0)
    goal_relevance: float = Field(0.3, ge=0)
    emotional_charge: float = Field(0.2, ge=0)
    urgency: float = Field(0.2, ge=0)

    @model_validator(mode="after")
    def _sum_to_one(self) -> SalienceWeights:
        total = self.novelty + self.goal_relevance + self.emotional_charge + self.urgency
        if not math.isclose(total, 1.0, abs_tol=1e-9):
            raise ValueError(f"attention.weights must sum to 1, they sum to {total:g}")
        return self


class AttentionSettings(_Section):
    """`loop.attention:` in runtime.yaml: the attention queue's salience (plan §3.4)."""

    weights: SalienceWeights = SalienceWeights()
    urgency: dict[Source, float] = Field(default_factory=lambda: dict(DEFAULT_URGENCY))
    decay: float = Field(0.8, gt=0, le=1)          # losers' urgency × decay per cycle
    urgency_floor: float = Field(0.05, ge=0, le=1)
    queue_max: int = Field(32, ge=1)               # pending candidates kept
    report_max_tokens: int = Field(200, ge=40)     # the state report's budget
    report_text_chars: int = Field(80, ge=10)      # quoted text is cut to this length

    @model_validator(mode="after")
    def _urgency_range(self) -> AttentionSettings:
        for source, value in self.urgency.items():
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"attention.urgency.{source} must be in [0, 1], got {value!r}")
        return self



class ActionSettings(_Section):
    """The action check's confidence floors (plan §3.4); `loop.actions` in runtime.yaml."""

    # A thought of the mind's own is spoken to the user only when it is this sure.
    internal_communicate_confidence: float = Field(0.8, ge=0, le=1)
    external_effect_confidence: float = Field(0.5, ge=0, le=1)
    internal_external_effect_confidence: float = Field(0.95, ge=0, le=1)
    # source_confidence below this makes an input's impulses count as self-generated
    trusted_source_confidence: float = Field(0.5, ge=0, le=1)


class UnpromptedSettings(_Section):
    """The bar a thought of the mind's own must pass to be said to the user unprompted
    (issue 27; `loop.unprompted`, src/loop/acting.py). Confident is the action check's
    `loop.actions.internal_communicate_confidence`; a failure notice never passes; and the
    answer must be new: compared with every message of the conversation window, the last
    `recent_said` replies said to the user and the thought that raised it."""

    # a repeat: one earlier text holds this share of the answer's content words
    repeat_overlap: float = Field(0.6, gt=0, le=1)
    # new: at least this many of its content words are in none of those texts
    min_new_words: int = Field(2, ge=0)
    recent_said: int = Field(50, ge=0)             # replies said to the user kept to compare with


class LoopSettings(_Section):
    """The `loop:` section of runtime.yaml."""

    idle_wait_s: float = Field(1.0, gt=0)
    dmn_hops: int = Field(2, ge=0, le=2)
    max_tool_calls: int = Field(2, ge=0)
    reflex_recall_lines: int = Field(5, ge=0)
    recent_context: int = Field(5, ge=1)           # recent focus vectors kept for salience
    cost_line_refresh_s: float = Field(30.0, ge=0)
    actions: ActionSettings = ActionSettings()
    unprompted: UnpromptedSettings = UnpromptedSettings()
    # issue 11: model work of one cycle (answer, FOK, escalation, retries) ends by this: a hung
    # model holds a user's turn (and the messages behind it) no longer. None: System 1's timeout
    # plus the longer of System 1's and 2's (src/loop/thinking.py; minutes for a local model)
    cycle_deadline_s: float | None = Field(60.0, gt=0)
    combine_max: int = Field(8, ge=1)              # waiting user messages taken as one turn
    cycle_retries: int = Field(3, ge=0)            # a failed cycle's input is retried this often
    retry_backoff_s: float = Field(0.5, gt=0)      # doubling wait after a failed cycle
    attention: AttentionSettings = AttentionSettings()   # the attention queue (src/loop/attention_queue.py)
    retry_backoff_max_s: float = Field(10.0, gt=0)
    # §3.6 always-escalate triggers (src/loop/triggers.py): how close the input must be to
    # an identity or goal memory to touch it, and the center that makes a memory identity-tier
    trigger_similarity: float = Field(0.75, ge=0, le=1)
    identity_center: float = Field(0.8, ge=0, le=1)
