"""The deep pass's unit of work: a phase (plan §4.2–§4.6).

A deep pass runs an ordered list of `Phase`s (src/consolidation/deep/deep_pass.py `DEEP_PHASES`).
Each is `async def run(ctx: DeepPassContext) -> PhaseResult`; the pass checkpoints
after every phase, so a crash resumes at the first phase without a `done` checkpoint.
A phase must therefore be safe to run again after a crash half-way through it: it
reads its work from the database (not from another phase's memory) and writes each
unit of work in one transaction together with its `ctx.mark_done(key)` record.

A phase that cannot do its work raises: a provider error that is not about one batch (an
outage, a request the endpoint refuses) propagates out of the phase, and so does a bug.
The pass then records the phase as failed and backs off (failures.py). A reply that
stays malformed after its repair, or a batch over the model's window (asked again in
halves), is one item's failure (a `consolidation_failures` row), not the phase's; a
skipped capability skips the step; a call the mind cancelled itself stops the pass
(`interrupts`).

Adding a phase is one line in `DEEP_PHASES`.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import asyncpg

from src.errors import (
    CallCancelled,
    CircuitOpen,
    ContextOverflow,
    MalformedOutput,
    ProviderError,
    ProviderSkipped,
    ReplyCut,
)
from src.providers.protocols import Embedder, LanguageModel
from src.weights.safety import Safety

if TYPE_CHECKING:
    from src.consolidation.settings import ConsolidationSettings

log = logging.getLogger(__name__)


@dataclass
class CallBudget:
    """The LLM calls one deep pass may make, shared by all its phases (plan §4.8).

    A structured call that needed its repair round costs two calls.
    """

    limit: int
    used: int = 0
    tokens_in: int = 0
    tokens_out: int = 0

    @property
    def left(self) -> int:
        return max(0, self.limit - self.used)

    def can_spend(self, calls: int = 1) -> bool:
        return self.used + calls <= self.limit

    def spend(self, calls: int = 1, tokens_in: int = 0, tokens_out: int = 0) -> None:
        self.used += calls
        self.tokens_in += tokens_in
        self.tokens_out += tokens_out


def interrupts(exc: ProviderError) -> bool:
    """True for a call the mind ended itself (CallCancelled: the user's turn, shutdown): the
    pass stops where it is and stays 'running', resumed at the next check, no failure
    counted. Any other skip (not configured, the background budget spent) skips the step."""
    return isinstance(exc, CallCancelled)


def calls_made(exc: ProviderError) -> int:
    """LLM calls a failed request cost the pass's budget: none when it was never sent
    (not configured, breaker open, over the window), two for a reply still malformed after
    its repair, one for a reply its cap cut (not repaired), else one (the ledger has its attempts)."""
    if isinstance(exc, ProviderSkipped | CircuitOpen | ContextOverflow):
        return 0
    return 2 if isinstance(exc, MalformedOutput) and not isinstance(exc, ReplyCut) else 1


@dataclass
class PhaseResult:
    """What one phase did: counts by name, LLM calls it used, and why it skipped, if it did."""

    counts: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    skipped: str | None = None
    data: dict[str, Any] = field(default_factory=dict)   # saved with the checkpoint (e.g. questions)

    def add(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n

    def as_json(self) -> dict[str, Any]:
        return {"counts": self.counts, "calls": self.calls, "skipped": self.skipped, "data": self.data}


@dataclass
class DeepPassContext:
    """Everything a phase may use. `llm` is None offline (reflex mode): LLM-only phases skip."""

    pool: asyncpg.Pool
    embedder: Embedder
    llm: LanguageModel | None
    safety: Safety
    settings: ConsolidationSettings
    now: datetime
    rng: random.Random
    pass_id: int
    budget: CallBudget
    phase: str = ""
    # unit-of-work keys already done in this pass's current phase, with any saved payload
    # (filled on resume)
    done: dict[str, Any] = field(default_factory=dict)
    # texts to offer the loop as `consolidation` input when the pass ends (insights, tensions)
    announce: list[str] = field(default_factory=list)
    skipped_steps: dict[str, str] = field(default_factory=dict)
    # center of each memory the first time this pass changed it: the Phase B rate limit
    # measures every change of the pass against it (cycle_baseline_center)
    baseline_centers: dict[int, float] = field(default_factory=dict)

    def skip(self, step: str, reason: str) -> None:
        """Record an LLM-only (or otherwise impossible) step as skipped; logged once per pass."""
        if step not in self.skipped_steps:
            self.skipped_steps[step] = reason
            log.info("deep pass %d: %s skipped: %s", self.pass_id, step, reason)

    @property
    def purpose(self) -> str:
        """The llm_calls purpose of the current phase."""
        return f"consolidation:{self.phase}"

    async def mark_done(self, conn: asyncpg.Connection | asyncpg.Pool, key: str, payload: Any = None) -> None:
        """Record a unit of work as done (inside the caller's transaction when given one).

        `payload` keeps e.g. a model's validated answer, so a resumed pass reuses it.
        """
        from src.consolidation.deep import checkpoints

        await checkpoints.mark_unit_done(conn, self.pass_id, self.phase, key, payload)
        self.done[key] = payload


PhaseRun = Callable[[DeepPassContext], Awaitable[PhaseResult]]


@dataclass(frozen=True)
class Phase:
    """One named step of the deep pass. `needs_llm`: skipped (and logged) offline."""

    name: str
    run: PhaseRun
    needs_llm: bool = False
