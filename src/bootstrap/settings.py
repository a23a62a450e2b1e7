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
    # milestone 2: the cosine (question vs memory) a recalled memory needs to count as relevant, per
    # embed model ("default" for any other): the values of the reflection bank's measured floor
    # (metacognition.escalation.reflection.min_similarity, notes.md "Thresholds per embedder")
    relevant_similarity: dict[str, float] = Field(
        default_factory=lambda: {"default": 0.35, "minilm-l6-v2-int8": 0.4})
    goal_match: float = Field(0.8, ge=-1, le=1)          # declared vs held goal (milestone 9)
    aligned_similarity: float = Field(0.6, ge=-1, le=1)  # answer vs self-formed value (milestone 10)

    def relevant_floor(self, embed_model: str) -> float:
        """Milestone 2's cosine floor for `embed_model`."""
        return self.relevant_similarity.get(embed_model, self.relevant_similarity.get("default", 0.35))
