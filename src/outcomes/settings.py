"""Settings of outcome tracking (runtime.yaml `outcomes:`, plan §5.3). Pure."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class UseSettings(BaseModel):
    """When an answer drew on a memory of its context (plan §5.3; src/outcomes/use.py)."""

    model_config = ConfigDict(extra="forbid")

    # share of the memory's own content words (those the question did not hold) in the answer
    min_share: float = Field(0.3, gt=0, le=1)
    min_words: int = Field(2, ge=1)                      # ... and at least this many of them
    # the user's message holds this share of a memory's words: the user said it again
    restate_share: float = Field(0.8, gt=0, le=1)
    tracks: tuple[str, ...] = ("situational", "identity")   # context sections measured


class OutcomeSettings(BaseModel):
    """`outcomes:` in runtime.yaml: how an outcome is linked to the decisions before it, and
    when an answer counts as having used a memory."""

    model_config = ConfigDict(extra="forbid")

    lookback_s: float = Field(1800.0, gt=0)      # decisions an outcome is linked back to
    max_links: int = Field(50, ge=1)             # per subject kind
    use: UseSettings = UseSettings()             # memories an answer drew on (§5.3)
