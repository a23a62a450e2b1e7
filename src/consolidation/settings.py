"""Settings of light and deep consolidation (plan §4.1, §4.2): runtime.yaml `consolidation:`.

Pure: no feature imports. Similarity thresholds (merge 0.85, themes) depend on the
embedding model, so they are keyed by embed model name with a `default` entry; the
offline embedder has its own, measured by `python -m bench.bench_merges --calibrate`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from src.consolidation.evolution.settings import EvolutionSettings
from src.skills.settings import SkillProposalSettings

DEFAULT_MODEL_KEY = "default"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SimilarityThresholds(_Section):
    """Cosine thresholds of one embedding model (on CLUSTERING embeddings)."""

    merge: float = Field(0.85, gt=0.0, le=1.0)        # same thing said again: one insight (§4.2)
    # ...and sharing this much of the leader's content words (Jaccard, stop words out):
    # cosine alone merges distinct facts said in one frame. 0.8 lets one word in ten
    # differ; measured with the offline embedder (WORDLLAMA_THRESHOLDS), kept for every
    # model as it judges the words, not the vectors
    merge_overlap: float = Field(0.8, ge=0.0, le=1.0)
    theme: float = Field(0.6, gt=0.0, le=1.0)         # same topic: an emerging theme (§4.1)
    contradiction_pair: float = Field(0.7, gt=0.0, le=1.0)   # pairs worth a contradiction check
    # An insight's every citation must be at least this close to it (issue 27): a memory
    # cited for an insight it says nothing about lends it weight it did not earn. The
    # default is not measured (set one per model); wordllama's: WORDLLAMA_THRESHOLDS
    insight_citation: float = Field(0.2, ge=-1.0, le=1.0)


# The history tables retention may trim (src/consolidation/light/retention.py rolls each up).
HISTORY_TABLE_NAMES = ("consolidation_log", "gate_decisions", "thought_log", "gut_deltas", "llm_calls",
                       "dmn_items", "recall_outcomes", "safety_events", "escalations")


class TableRetention(_Section):
    """One history table's window: rows older than `days` go, and rows beyond the newest
    `max_rows`; None = no such limit."""

    days: float | None = Field(None, gt=0)
    max_rows: int | None = Field(None, ge=1)


def _default_tables() -> dict[str, TableRetention]:
    # Long enough for every reader (utility scores within days, gate tuning and alignment
    # within a pass's window, the web view's 30-day charts); the ledger keeps 90 days of
    # rows, its totals forever (llm_calls_daily). gut_deltas carry a 768-d vector each.
    days = {"consolidation_log": 30, "gate_decisions": 30, "thought_log": 30, "gut_deltas": 7,
            "llm_calls": 90, "dmn_items": 30, "recall_outcomes": 30, "safety_events": 90, "escalations": 90}
    caps = {"consolidation_log": 2_000_000, "gut_deltas": 100_000}
    return {t: TableRetention(days=d, max_rows=caps.get(t)) for t, d in days.items()}


class RetentionSettings(_Section):
    """Bounded history (issue 24): what the light ticker trims, in small batches."""

    # into history_daily (cost totals live in llm_calls_daily, never lost)
    enabled: bool = True
    interval_s: float = Field(300.0, ge=0)
    batch: int = Field(5000, ge=1)          # rows per DELETE statement
    # statements per table per round: 20,000 rows a table every 5 minutes (5.8M a day) is
    # far above any table's inflow; 20 statements held a 1M store's tick at 1.2 s
    max_batches: int = Field(4, ge=1)
    # days and/or max_rows per table; a table named here replaces its default
    tables: dict[str, TableRetention] = Field(default_factory=_default_tables)

    @field_validator("tables", mode="before")
    @classmethod
    def _over_defaults(cls, given: object) -> object:
        """A table named in runtime.yaml replaces its default rule; the others keep theirs
        (`{days: null, max_rows: null}` keeps a table whole)."""
        if not isinstance(given, dict):
            return given
        return {**{t: r.model_dump() for t, r in _default_tables().items()}, **given}

    @model_validator(mode="after")
    def _known_tables(self) -> RetentionSettings:
        unknown = sorted(set(self.tables) - set(HISTORY_TABLE_NAMES))
        if unknown:
            raise ValueError(f"retention: unknown history tables {unknown}; known: {', '.join(HISTORY_TABLE_NAMES)}")
        return self


class LightSettings(_Section):
    """The background ticker (plan §4.1). Each operation has its own minimum interval."""

    enabled: bool = True
    tick_s: float = Field(10.0, gt=0)                 # how often the ticker wakes up
    # decay tick: memories not retrieved for `unused_after_days` get contradict(decay_amount),
    # at most once per `decay_period_hours` each, at most `decay_batch` per tick
    decay_interval_s: float = Field(60.0, ge=0)
    # unused_after_days, once per decay_period_hours each, decay_batch per tick
    unused_after_days: float = Field(7.0, gt=0)
    decay_period_hours: float = Field(24.0, gt=0)
    decay_amount: float = Field(0.01, gt=0)
    decay_batch: int = Field(2000, ge=1)
    # co-access upkeep: a pair idle for `co_access_idle_days` halves its count (once per idle
    # period); pairs whose count falls below `co_access_prune_below` are deleted
    co_access_interval_s: float = Field(300.0, ge=0)
    # co_access_prune_below are deleted
    co_access_idle_days: float = Field(7.0, gt=0)
    co_access_prune_below: int = Field(1, ge=1)
    # pairs halved or pruned per tick: 20,000 every 5 minutes covers 5M pairs (a 1M store)
    # in a day, each needs it once a week; 50,000 took 0.5-0.7 s of a 1M store's tick
    co_access_batch: int = Field(20_000, ge=1)
    # heap pages of memory_co_access one tick looks through for idle pairs, resuming where the
    # last stopped (~115 pairs a page: 2,000 pages ~230,000 pairs, a 5M-pair table in 21 ticks)
    co_access_pages: int = Field(2_000, ge=1)
    # queued near-miss suppression (src/recall/mutation.py apply_near_misses): every tick (0),
    # at most `near_miss_batch` queued retrievals a tick, oldest first (notes.md "Near misses")
    near_miss_interval_s: float = Field(0.0, ge=0)
    # queued retrievals per tick (20 a second at 10 s ticks)
    near_miss_batch: int = Field(200, ge=1)
    # contradiction scan: sample recently used memories, check each against its nearest neighbour
    contradiction_interval_s: float = Field(120.0, ge=0)
    contradiction_recent_hours: float = Field(24.0, gt=0)
    contradiction_samples: int = Field(8, ge=0)
    contradiction_llm_pairs: int = Field(2, ge=0)     # LLM layer calls per scan, at most
    # LLM layer calls of the scan in any hour, at most: its share of the background budget
    # (providers.budget.hourly_calls, 20: a fifth), so the deep pass does not wait behind it
    contradiction_llm_per_hour: int = Field(4, ge=0)
    # pattern detection: cluster the newest memories, record themes for the deep pass
    pattern_interval_s: float = Field(600.0, ge=0)
    pattern_recent: int = Field(200, ge=2)
    pattern_min_size: int = Field(3, ge=2)
    # Phase C monitors once per consolidation cycle: every tick (0; they read the center
    # summary of sql/080, whatever the store's size) and after every deep pass
    monitors: bool = True
    # every tick (0) and after every deep pass
    monitors_interval_s: float = Field(0.0, ge=0)
    # bounded history: each history table's window, trimmed every retention.interval_s
    retention: RetentionSettings = Field(default_factory=RetentionSettings)


class DeepSettings(_Section):
    """The deep pass (plan §4.2). Triggered by the timer or by cumulative importance."""

    enabled: bool = True
    check_interval_s: float = Field(60.0, gt=0)       # how often the scheduler checks its triggers
    interval_s: float = Field(3600.0, gt=0)           # the hourly timer
    # Cumulative importance of what the exit gate wrote since the last pass (see notes.md):
    # sum over persist / persist_flag / reinforce decisions of relevance * (1 + charge).
    importance_threshold: float = Field(30.0, gt=0)
    # per pass, repairs included
    max_llm_calls: int = Field(15, ge=0)
    recent_memories: int = Field(100, ge=1)           # Phase 1 reads this many
    questions: int = Field(3, ge=1)
    insights_per_question: int = Field(5, ge=1)
    insight_evidence: int = Field(15, ge=1)           # memories recalled per question
    # imported strangers' lines may fill at most this share of the questions' input, from one
    # conversation (src/consolidation/deep/evidence.py): the pass reflects on the user's life
    imported_share: float = Field(0.0, ge=0, le=1)
    merge_candidates: int = Field(500, ge=2)          # new memories the merge looks at per pass
    # older memories the merge also looks at per pass: a window of a walk down the store from
    # where the last pass stopped (sql/157), so duplicates older than the newest are reached
    # (a store of S memories is walked in S / merge_walk passes; 0: the newest only)
    merge_walk: int = Field(500, ge=0)
    merge_neighbours: int = Field(8, ge=1)            # nearest stored memories per candidate
    merge_min_size: int = Field(2, ge=2)
    merge_batch: int = Field(4, ge=1)                 # clusters per LLM call
    narrative_min_size: int = Field(3, ge=2)
    narrative_batch: int = Field(3, ge=1)
    source_contradict: float = Field(0.3, ge=0)       # sources give way to their insight
    tension_min_center: float = Field(0.7, ge=0, le=1)
    tension_max_values: int = Field(3, ge=0)
    tension_behaviours: int = Field(12, ge=1)
    tension_fatigue_surfaces: int = Field(5, ge=0)
    recompress_batch: int = Field(8, ge=1)
    recompress_max: int = Field(16, ge=0)
    announce_max: int = Field(3, ge=0)                # insights/tensions offered to the loop per pass
    # What an insight may rest on (issue 27; src/consolidation/deep/integrity.py): one that
    # cites a boundary or seed must be about it (content-word Jaccard with it at least
    # `boundary_subject_overlap`); one that restates a memory it cites (Jaccard at least
    # `insight_copy_overlap`, the merge's near-duplicate word share) adds nothing
    boundary_subject_overlap: float = Field(0.25, gt=0.0, le=1.0)
    # an insight restating a memory it cites (Jaccard) is refused
    insight_copy_overlap: float = Field(0.8, gt=0.0, le=1.0)
    # A failed pass (a phase raised) is resumed at the failed phase after
    # retry_base_s * 2^(failures - 1), at most retry_max_s; a phase that fails
    # `phase_max_failures` times in a row is skipped (a consolidation_failures row, a WARNING)
    retry_base_s: float = Field(300.0, gt=0)
    # ...at most this long
    retry_max_s: float = Field(14400.0, gt=0)
    # a phase failing this many times in a row is skipped (consolidation_failures row)
    phase_max_failures: int = Field(3, ge=1)
    lock_key: int = 0x6D6F6C74646565              # pg advisory lock: one deep pass at a time


#: The offline embedder's `embed_model` (src/providers/embed_wordllama.wordllama_model_name).
WORDLLAMA = "wordllama-l2-supercat-256"
#: Chosen by `python -m bench.bench_merges --calibrate` on REALTALK's calibration half (a false merge
#: is a superseded turn whose content words no other source of its merge has) and ad hoc for
#: theme and insight_citation: the numbers are in notes.md ("Settings: the numbers behind them").
WORDLLAMA_THRESHOLDS = SimilarityThresholds(merge=0.8, merge_overlap=0.8, theme=0.6, insight_citation=0.1)


#: The sentence embedder's `embed_model` (src/providers/embed_minilm.py).
MINILM = "minilm-l6-v2-int8"
#: Each value gives wordllama's measured trade-off on the same calibration half (notes.md
#: "Thresholds per embedder").
MINILM_THRESHOLDS = SimilarityThresholds(merge=0.8, merge_overlap=0.8, theme=0.65, contradiction_pair=0.75,
                                         insight_citation=0.15)


def _default_thresholds() -> dict[str, SimilarityThresholds]:
    return {DEFAULT_MODEL_KEY: SimilarityThresholds(), WORDLLAMA: WORDLLAMA_THRESHOLDS, MINILM: MINILM_THRESHOLDS}


class ConsolidationSettings(_Section):
    light: LightSettings = LightSettings()
    deep: DeepSettings = DeepSettings()
    # cosine on CLUSTERING embeddings, per embed model; merge_overlap: the
    thresholds: dict[str, SimilarityThresholds] = Field(default_factory=_default_thresholds)
    # part 2 (plan §4.3–§4.6): promotion, decay, reconsolidation, tuning, contextual retrieval
    evolution: EvolutionSettings = EvolutionSettings()
    # skills proposed from clusters of procedural memories (src/skills/consolidation.py)
    skills: SkillProposalSettings = SkillProposalSettings()

    @model_validator(mode="after")
    def _has_default(self) -> ConsolidationSettings:
        if DEFAULT_MODEL_KEY not in self.thresholds:
            self.thresholds = {DEFAULT_MODEL_KEY: SimilarityThresholds(), **self.thresholds}
        return self

    def thresholds_for(self, embed_model: str) -> SimilarityThresholds:
        """The thresholds of `embed_model`, or the `default` entry."""
        return self.thresholds.get(embed_model, self.thresholds[DEFAULT_MODEL_KEY])
