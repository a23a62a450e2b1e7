"""Settings of bootstrap seeding, readiness detection and outcome tracking. Pure."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_BOUNDARIES = Path(__file__).with_name("safety_boundaries.txt")


class UseSettings(BaseModel):
    """When an answer drew on a memory of its context (plan §5.3; src/outcomes/use.py)."""

    model_config = ConfigDict(extra="forbid")

    # share of the memory's own content words (those the question did not hold) in the answer
    min_share: float = Field(0.3, gt=0, le=1)
    min_words: int = Field(2, ge=1)                      # ... and at least this many of them
    # the user's message holds this share of a memory's words: the user said it again
    restate_share: float = Field(0.8, gt=0, le=1)
    tracks: tuple[str, ...] = ("situational", "identity")   # context sections measured


class BootstrapSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    boundaries_path: Path = DEFAULT_BOUNDARIES
    seed_boundaries: bool = True
    # milestone 2: recall returned a learned (non-seed) memory at least this similar to the focus
    # (cosine; question vs stored statement sits around 0.3–0.7 depending on the embed model)
    relevant_similarity: float = Field(0.25, ge=-1, le=1)
    goal_match: float = Field(0.8, ge=-1, le=1)          # declared vs held goal (milestone 9)
    aligned_similarity: float = Field(0.6, ge=-1, le=1)  # answer vs self-formed value (milestone 10)
    outcome_lookback_s: float = Field(1800.0, gt=0)      # decisions an outcome is linked back to
    outcome_max_links: int = Field(50, ge=1)             # per subject kind
    use: UseSettings = UseSettings()                     # memories an answer drew on (§5.3)
