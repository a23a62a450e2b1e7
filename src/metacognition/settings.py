"""Settings of metacognition (runtime.yaml `metacognition:`, `escalation:`; plan §2.11,
§3.5–§3.7): composite confidence, escalation, the reflection bank. Pure pydantic."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ConfidenceWeights(_Section):
    objective: float = Field(0.5, ge=0)
    fok: float = Field(0.35, ge=0)
    verbalized: float = Field(0.15, ge=0)

    @model_validator(mode="after")
    def _positive(self) -> ConfidenceWeights:
        if self.objective <= 0:
            raise ValueError("metacognition.weights.objective must be > 0: it is the one signal "
                             "that always exists")
        return self


class HeuristicWeights(_Section):
    """Penalty weights of the structural heuristics; objective = ceiling·(1 - Σ wᵢ·pᵢ)."""

    hedging: float = Field(0.5, ge=0)
    self_correction: float = Field(0.3, ge=0)
    questions: float = Field(0.15, ge=0)
    length: float = Field(0.15, ge=0)


class ReflectionSettings(BaseModel):
    """`metacognition.escalation.reflection` in runtime.yaml."""

    model_config = ConfigDict(extra="forbid")

    k: int = Field(3, ge=1, le=20)
    # Cosine floor per embed model ("default" for any other): an unrelated focus brings back
    # nothing. Each offline model's is measured (notes.md "Thresholds per embedder"); measure
    # gemini-embedding-001 before trusting "default" with it (its cosines run higher).
    min_similarity: dict[str, float] = Field(
        default_factory=lambda: {"default": 0.35, "minilm-l6-v2-int8": 0.4})
    block_field_chars: int = Field(300, ge=40)     # per field in the injected block
    source_confidence: float = Field(0.8, ge=0, le=1)

    def floor(self, embed_model: str) -> float:
        return self.min_similarity.get(embed_model, self.min_similarity.get("default", 0.35))



class EscalationSettings(BaseModel):
    """`metacognition.escalation:` in runtime.yaml: when and how System 2 takes over."""

    model_config = ConfigDict(extra="forbid")

    complexity_threshold: float = Field(0.6, ge=0, le=1)
    identity_center: float = Field(0.7, ge=0, lt=1)     # "identity" memories: center above this
    threshold_refresh_s: float = Field(60.0, ge=0)      # EscalationThreshold(refresh_s=...)
    system2_max_tokens: int = Field(2048, ge=64)
    # §3.5 "track retry success rate": System 1's one retry is skipped (the draft goes to
    # System 2 at once) while, over the newest `retry_window` decisions, at least
    # `retry_min_retries` retries were made and fewer than `retry_min_success` of them reached
    # the threshold: a retry that rarely helps is a call spent and seconds waited for nothing.
    # It is tried again as soon as the window's rate recovers or its retries age out.
    retry_window: int = Field(200, ge=1)
    retry_min_retries: int = Field(20, ge=1)
    retry_min_success: float = Field(0.1, ge=0, le=1)
    reflection: ReflectionSettings = ReflectionSettings()


class MetacognitionSettings(_Section):
    """The `metacognition:` section of runtime.yaml."""

    weights: ConfidenceWeights = ConfidenceWeights()
    heuristics: HeuristicWeights = HeuristicWeights()
    heuristic_ceiling: float = Field(0.9, gt=0, le=1)
    logprob_share: float = Field(0.7, ge=0, le=1)
    # |ln(words / expected)| reaching ln(this) is a full length anomaly (4× too long or short).
    length_anomaly_ratio: float = Field(4.0, gt=1)
    fok_max_tokens: int = Field(200, ge=20)
    escalation: EscalationSettings = EscalationSettings()   # System 2 (src/metacognition/escalation.py)
