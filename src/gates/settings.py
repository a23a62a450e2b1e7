"""Settings of the entry gate, the scratch buffer and the exit gate (plan §2.8, §2.9).

Composed into runtime.yaml as the `gates:` section. Every field has a default, so
the section may be left out entirely.

Similarity thresholds depend on the embedding model: a cosine of 0.85
means "the same thing said again" for one model and "roughly the same topic" for
another. `exit.thresholds` is therefore keyed by embed model name; the entry named
`default` applies to any model without its own.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from src.recall.settings import TAU

DEFAULT_MODEL_KEY = "default"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EntryGateSettings(_Section):
    """Plan §2.9: a fast stochastic filter; what it keeps lands in scratch_buffer."""

    # Content shorter than this many characters (after trimming) is "short".
    short_chars: int = Field(10, ge=1)
    short_skip_rate: float = Field(0.95, ge=0.0, le=1.0)
    mechanical_skip_rate: float = Field(0.90, ge=0.0, le=1.0)


class ScratchSettings(_Section):
    """Scratch buffer lifecycle (plan §2.9) and the pruning-path rate limit (§3.3)."""

    ttl_hours: float = Field(24.0, gt=0)
    # Flush through the exit gate after this many exchanges (and at shutdown).
    flush_every: int = Field(5, ge=1)
    # Items evaluated per flush transaction: one embed call and one COPY each.
    flush_batch: int = Field(100, ge=1)
    # Burst pruning: at most one embedding call per this many seconds; the rest queue.
    prune_embed_interval_s: float = Field(5.0, ge=0.0)
    prune_embed_max_batch: int = Field(100, ge=1)


class GateThresholds(_Section):
    """The exit gate's axes for one embedding model (plan §2.8)."""

    # Relevance axis, on spreading activation S_i in [0, 1].
    core: float = Field(0.6, ge=0.0, le=1.0)
    peripheral: float = Field(0.3, ge=0.0, le=1.0)
    # Novelty axis, on cosine similarity to the nearest stored memory.
    confirming: float = Field(0.85, ge=-1.0, le=1.0)
    novel: float = Field(0.6, ge=-1.0, le=1.0)
    contradicting: float = Field(0.7, ge=-1.0, le=1.0)
    # Projection on the learned negation direction; None = use the calibration learned
    # with the direction (see src/gates/contradiction.py).
    opposition_no_below: float | None = Field(None, ge=0.0)
    opposition_yes_above: float | None = Field(None, ge=0.0)

    @model_validator(mode="after")
    def _ordered(self) -> GateThresholds:
        if self.peripheral > self.core:
            raise ValueError(f"peripheral ({self.peripheral}) must not exceed core ({self.core})")
        if self.novel > self.confirming:
            raise ValueError(f"novel ({self.novel}) must not exceed confirming ({self.confirming})")
        lo, hi = self.opposition_no_below, self.opposition_yes_above
        if (lo is None) != (hi is None):
            raise ValueError("set both opposition_no_below and opposition_yes_above, or neither")
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"opposition_no_below ({lo}) must not exceed opposition_yes_above ({hi})")
        return self


def _default_thresholds() -> dict[str, GateThresholds]:
    return {DEFAULT_MODEL_KEY: GateThresholds()}


class ExitGateSettings(_Section):
    """The 3×3 matrix, its noise floor, and the bootstrap relevance floor (plan §2.8)."""

    # per embed model; "default" covers any other model
    thresholds: dict[str, GateThresholds] = Field(default_factory=_default_thresholds)
    # Probability, in every cell, that the gate takes the cell's alternative action.
    noise_floor: float = Field(0.05, ge=0.0, le=1.0)
    # Relevance floor for these sources at maturity 0; fades linearly to 0 at maturity 1.
    bootstrap_floor: float = Field(0.65, ge=0.0, le=1.0)
    bootstrap_sources: list[str] = Field(default_factory=lambda: ["external_user"])
    # Sources whose lines are classified statement / question / chatter
    # (src/gates/utterance.py): the user's statements that carry information are kept
    # in a store of any maturity (relevance at least `statement_relevance`, above
    # `core`), chatter is irrelevant, questions are dropped.
    statement_sources: list[str] = Field(default_factory=lambda: ["external_user"])
    statement_relevance: float = Field(0.7, ge=0.0, le=1.0)
    # Emotional charge (v0.1, or the gut's when wired) above `charge_bonus_above` adds
    # `charge_bonus` to an item's relevance (plan §2.8: "+0.15 bonus when > 0.3").
    charge_bonus: float = Field(0.15, ge=0.0, le=1.0)
    charge_bonus_above: float = Field(0.3, ge=0.0, le=1.0)
    # ACT-R's persist threshold τ (plan §2.7): an item whose activation reaches it rises one
    # relevance row where that decides whether it is kept (src/gates/matrix.py `TAU_LIFTS`);
    # None: the row is relevance's alone.
    persist_tau: float | None = TAU
    # Flushes an item may stay in the "buffer" cell; after that it is persisted.
    max_buffer_rounds: int = Field(3, ge=1)
    # Neighbours from check_novelty() considered per item.
    novelty_k: int = Field(5, ge=1)
    # Most recent memories that stand in for the attention focus until the loop sets one.
    context_recent_memories: int = Field(5, ge=0)
    reinforce_amount: float = Field(0.5, gt=0)
    contradict_amount: float = Field(0.5, gt=0)
    # Neighbours above the contradicting threshold that are screened for opposition,
    # most similar first. Screening more than the nearest flagged far more items against a
    # memory they do not contradict (notes.md "Settings: the numbers behind them").
    contradiction_candidates: int = Field(1, ge=1)
    # Layer 3 of contradiction detection: at most this many LLM micro-calls per item.
    llm_pairs_per_item: int = Field(1, ge=0)
    # Layer 3's relation question for a user's statement, one call (src/gates/model_questions.py
    # `to_ask`): asked of the earlier statement the offline cues picked, if any, and of its
    # closest earlier statements, at most this many, at least `relation_floor` alike (cosine). Most
    # changes are told in words that share little with the older ("Charging the Kia…" after
    # "I drive a Ford Focus"): below the contradiction screen's similarity a model was never
    # asked. 0: the cues alone decide (runtime.local.yaml: a small model answers at chance).
    relation_pairs: int = Field(5, ge=0)
    relation_floor: float = Field(0.35, ge=0, le=1)
    # When that question names no update, a second asks about the user's earlier statements
    # nearest what the model said the new one is about ("my car" finds "I drive a Ford Focus"),
    # at most this many not asked already, at least `relation_about_floor` alike (cosine of the
    # phrase and the statement: a short phrase is less alike; 0: no second question).
    relation_about: int = Field(3, ge=0)
    relation_about_floor: float = Field(0.2, ge=0, le=1)
    # Micro-calls in flight at once during one flush.
    llm_concurrency: int = Field(4, ge=1)
    # Retries shared by all micro-calls of one flush (a rate limit hits them together).
    llm_shared_retries: int = Field(3, ge=0)
    # Seconds between recomputations of the store centroid (emotional charge v0.1).
    centroid_refresh_s: float = Field(300.0, ge=0.0)

    @model_validator(mode="after")
    def _has_default(self) -> ExitGateSettings:
        if DEFAULT_MODEL_KEY not in self.thresholds:
            self.thresholds = {DEFAULT_MODEL_KEY: GateThresholds(), **self.thresholds}
        return self

    def thresholds_for(self, embed_model: str) -> GateThresholds:
        """The thresholds of `embed_model`, or the `default` entry."""
        return self.thresholds.get(embed_model, self.thresholds[DEFAULT_MODEL_KEY])


class MemorySettings(_Section):
    """`gates.memory:` — how eagerly the mind writes (issue 17).

    autopilot: the gates decide alone (the plan's behaviour). copilot: what the exit
    gate is unsure of waits for the guardian's confirmation, asked after an answer.
    off: nothing new is persisted; recall and the loop go on. `/memory-mode` changes
    it for the running session.
    """

    # autopilot | copilot (unsure items wait for "Keep these? (y/n/numbers)") | off
    mode: Literal["autopilot", "copilot", "off"] = "autopilot"


class GateSettings(_Section):
    """`gates:` in runtime.yaml."""

    entry: EntryGateSettings = EntryGateSettings()
    scratch: ScratchSettings = ScratchSettings()
    exit: ExitGateSettings = ExitGateSettings()
    memory: MemorySettings = MemorySettings()     # how eagerly the mind writes (src/gates/modes.py)
    # Seed of the gates' random generator; None draws one from the OS (tests fix it).
    seed: int | None = None
