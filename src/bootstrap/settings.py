"""Settings of bootstrap seeding and readiness detection (runtime.yaml `bootstrap:`). Pure."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_BOUNDARIES = Path(__file__).with_name("safety_boundaries.txt")


class BootstrapSettings(BaseModel):
    """`bootstrap:` in runtime.yaml: the seeded boundaries and the readiness milestones."""

    model_config = ConfigDict(extra="forbid")

    boundaries_path: Path = DEFAULT_BOUNDARIES
    seed_boundaries: bool = True
    # milestone 2: recall returned a learned (non-seed) memory at least this similar to the focus
    # (cosine; question vs stored statement sits around 0.3–0.7 depending on the embed model)
    relevant_similarity: float = Field(0.25, ge=-1, le=1)
    goal_match: float = Field(0.8, ge=-1, le=1)          # declared vs held goal (milestone 9)
    aligned_similarity: float = Field(0.6, ge=-1, le=1)  # answer vs self-formed value (milestone 10)
