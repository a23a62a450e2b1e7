"""Recall's settings (runtime.yaml `recall:`, its `retrieval:` and `layers:`): pure pydantic, imported by config.

The plan's constants live here so that the pure math (src/recall/activation.py,
relevance.py) and the settings share one value without config importing the math.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: ACT-R constants (plan §2.7): decay d, noise s, mismatch penalty P, threshold τ.
DECAY_D = 0.5
NOISE_S = 0.4
MISMATCH_P = -1.0
TAU = 0.0

#: Memory count at which the store counts as mature (plan §3.5).
MATURITY_MEMORIES = 1000


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ActRSettings(_Section):
    """ACT-R constants (plan §2.7)."""

    d: float = Field(DECAY_D, gt=0, lt=1)
    s: float = Field(NOISE_S, ge=0)
    P: float = Field(MISMATCH_P, le=0)
    tau: float = TAU


class ArmWeights(_Section):
    """RRF arm weights and recency share; tuned per embed model."""

    w_vector: float = Field(1.0, ge=0)
    w_fulltext: float = Field(1.0, ge=0)
    w_recency: float = Field(0.1, ge=0)
    rrf_k: float | None = Field(None, gt=0)      # None: retrieval.rrf_k
    # full text's evidence (src/recall/search.py): a row counts fully in the fusion when its
    # score reaches this share of a unique word's idf; 0: every full-text row fully
    fts_confidence: float = Field(0.0, ge=0)
    # the user's own statements as a third arm, for a question about the user (src/recall/
    # search.py's own arm); 0: off
    w_own: float = Field(0.0, ge=0)
    # the cosine at which a line the user just said (unflushed) matches the question by vector
    # (src/recall/working.py); None: by its words only. MiniLM and wordllama: the 95th
    # percentile of a question's cosine with the user's other facts (paraphrases' dev half);
    # "default" (Gemini's cosines run higher) is not measured
    working_floor: float | None = Field(0.55, ge=-1, le=1)


#: The offline embedder's `embed_model` (src/providers/embed_wordllama.wordllama_model_name).
WORDLLAMA = "wordllama-l2-supercat-256"

#: wordllama's arms, chosen on the tune conversations of real human chats (bench/bench_realconv.py
#: --tune) and the paraphrases' dev half (bench/bench_paraphrase.py --tune): its vectors are weak
#: on chat turns, so the vector arm weighs less than full text (notes.md "Settings: the numbers
#: behind them").
WORDLLAMA_ARMS = ArmWeights(w_vector=0.25, w_fulltext=1.0, w_recency=0.1, rrf_k=30, fts_confidence=0.75,
                            w_own=1.0, working_floor=0.15)

#: The sentence embedder's `embed_model` (src/providers/embed_minilm.py).
MINILM = "minilm-l6-v2-int8"

#: MiniLM's arms (issue 35), chosen on the same two tuning halves: the vector arm weighs more so
#: that full text's matches of common words do not fill the candidates; fts_confidence lets a
#: full-text row count fully only when it holds a rarer word; w_own ranks the user's own lines
#: (notes.md "Settings: the numbers behind them").
MINILM_ARMS = ArmWeights(w_vector=0.5, w_fulltext=1.0, w_recency=0.1, rrf_k=30, fts_confidence=0.75, w_own=0.5,
                         working_floor=0.24)


class RetrievalSettings(_Section):
    candidates: int = Field(50, ge=1)        # per search arm
    limit: int = Field(20, ge=1)             # what ACT-R, relevance and rerank see
    keep: int = Field(5, ge=1)               # retrieved after rerank
    # unflushed scratch rows (what was just said) returned beside the memories (working.py)
    working_k: int = Field(3, ge=0)
    rrf_k: float = Field(60.0, gt=0)
    # full text: a question's word found only in a memory's conversation context counts this
    # much of a word of the memory itself (src/recall/conversation.py; bench_realconv --context)
    context_weight: float = Field(0.5, ge=0, le=1)
    # per embed model; "default" for any other; rrf_k per model overrides rrf_k
    arms: dict[str, ArmWeights] = Field(
        default_factory=lambda: {"default": ArmWeights(), WORDLLAMA: WORDLLAMA_ARMS, MINILM: MINILM_ARMS})
    # The share of a memory's relevance that ACT-R's P(retrieve) scales (src/recall/scoring.py):
    # the test of tests/test_recall_scoring.py holds what it does to equal matches; kept at the
    # plan's 0.3 (real chats cannot tell the values apart: notes.md)
    activation_share: float = Field(0.3, ge=0, le=1)
    # a question about the user: what the user stated gets this much over other speakers'
    # and the mind's words at a similar match (src/recall/scoring.py; bench_paraphrase dev half)
    user_word: float = Field(0.3, ge=0, le=1)
    # what relevance's semantic component reads: cosine | fused | blend (relevance.py).
    # blend: real chats cannot tell it from fused and the synthetic set prefers it (notes.md)
    semantic_signal: Literal["cosine", "fused", "blend"] = "blend"
    reinforce_retrieved: float = Field(0.1, ge=0)
    contradict_near_miss: float = Field(0.05, ge=0)
    # near-miss suppression queued for the light ticker, which applies it each tick summed per
    # memory (src/recall/mutation.py); false: applied at retrieval (the mind sets it so when
    # the light ticker is off)
    near_miss_deferred: bool = True
    # below this center a memory needs a strong cue...
    dormant_center: float = Field(0.15, ge=0, le=1)
    # ...cosine above this
    dormant_similarity: float = Field(0.9, ge=0, le=1)
    spread_top_k: int = Field(3, ge=1)
    spread_seeds: int = Field(3, ge=1)       # best hits used as seeds when nothing is active
    # Memories reached only by spreading that join the candidates, the most activated first
    # (plan §3.1: "cap ... to prevent noise"). A mature co-access graph reaches far more than
    # fit the top `limit`, and the weakly activated ones never made it. Spread still lifts every
    # search hit it reaches.
    spread_join: int = Field(20, ge=0)
    # What is current (src/recall/current.py): two of the user's statements this close (cosine)
    # are about the same subject, and when the newer answers the question at least
    # `current_close` as well as the older it ranks first (bench_updates, dev half)
    current_same_subject: float = Field(0.6, ge=0, le=1)
    current_close: float = Field(0.7, ge=0, le=1)
    # A question that names a period (src/recall/in_time.py): that period's memories nearest
    # the question join the candidates (0: none) and score `frame_boost` times their weight; a
    # question asking when favours memories whose words name a time by `when_boost` (REALTALK's
    # tune half, 43 questions naming a time, 84 asking when: boost 1.5 best at @5, 3 lost 4
    # points there; bench_realconv --time, notes.md)
    frame_join: int = Field(10, ge=0)
    frame_boost: float = Field(1.5, ge=1)
    when_boost: float = Field(1.5, ge=1)
    act_r: ActRSettings = ActRSettings()

    def arm_weights(self, embed_model: str) -> ArmWeights:
        return self.arms.get(embed_model) or self.arms.get("default") or ArmWeights()

    def rrf_k_for(self, embed_model: str) -> float:
        """The RRF k of `embed_model`: its arms entry's, else `rrf_k`."""
        k = self.arm_weights(embed_model).rrf_k
        return self.rrf_k if k is None else k


class LayerSettings(_Section):
    """Layer 0 (values/beliefs) and Layer 1 (goals), plan §2.4: JSON lists of
    {"text": ..., "weight": 0..1}. Missing files mean an empty layer (bootstrap)."""

    values_path: Path = Path("./data/layers/values.json")
    goals_path: Path = Path("./data/layers/goals.json")
    cache_dir: Path = Path("./data/layers/cache")


class RecallSettings(_Section):
    """`recall:` in runtime.yaml: hybrid search and its layers (src/recall/retrieval.py), and
    the value and goal layers recall and attention read (src/recall/layers.py)."""

    retrieval: RetrievalSettings = RetrievalSettings()
    layers: LayerSettings = LayerSettings()
