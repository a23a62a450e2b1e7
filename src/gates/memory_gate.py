"""The gates as one object for the process: entry gate, scratch lifecycle, exit gate.

`Gates.build` wires them from settings and providers; main calls `admit` for every
plain input, `recover` at start-up and `shutdown` at graceful exit. The context
window's pruning (plan §3.3) calls `prune`, whose embedding goes through the
rate-limited embedder (one call per `prune_embed_interval_s`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import asyncpg
import numpy as np

from src.gates import held, held_repository, scratch
from src.gates.entry import PREVIEW_CHARS, Admitted, EntryGate
from src.gates.exit import ExitGate, ExitSetup
from src.gates.modes import OFF_TAG
from src.gates.rate_limit import RateLimitedEmbedder
from src.gates.scratch import FlushReport, ScratchLifecycle
from src.gates.settings import GateSettings
from src.gates.tuning import tuned_gate_values, tuned_settings
from src.providers.protocols import Embedder, LanguageModel
from src.text import clean_text
from src.weights.safety import Safety


class Gates:
    """Entry gate -> scratch buffer -> exit gate, for one running mind."""

    def __init__(self, pool: asyncpg.Pool, entry: EntryGate, exit_gate: ExitGate,
                 lifecycle: ScratchLifecycle, settings: GateSettings):
        self.mode = exit_gate.mode        # one MemoryMode for the whole mind
        self.pool = pool
        self.entry = entry
        self.exit = exit_gate
        self.lifecycle = lifecycle
        self.settings = settings
        self._tuning_read_at: float | None = None
        self.held_at_start = 0            # items earlier runs held, loaded by `recover`

    # Seconds between reads of the parameters consolidation tunes (plan §4.5).
    TUNING_REFRESH_S = 60.0

    async def load_tuning(self) -> dict[str, float]:
        """Use the gate parameters consolidation tuned (`gate_tuning`) from now on: new settings,
        swapped whole into the three gates (no settings object is changed in place)."""
        self.settings, values = tuned_settings(self.settings, await tuned_gate_values(self.pool))
        self.exit.settings = self.settings
        self.entry.settings = self.settings.entry
        self.entry.ttl = timedelta(hours=self.settings.scratch.ttl_hours)
        self.lifecycle.settings = self.settings.scratch
        self._tuning_read_at = time.monotonic()
        return values

    @classmethod
    def build(cls, pool: asyncpg.Pool, embedder: Embedder, llm: LanguageModel,
              settings: GateSettings, safety: Safety, *, rng: random.Random | None = None,
              entry_rng: random.Random | None = None, setup: ExitSetup | None = None) -> Gates:
        """Each gate has its own generator, seeded from `settings.seed` when set: the entry
        gate runs in the loop and the exit gate in a background flush, so a shared one
        made the draws depend on how the two interleaved (issue 11). `setup`: the exit
        gate's parts (its pruning embedder is made here, rate-limited)."""
        rng = rng or random.Random(settings.seed)
        if entry_rng is None:
            entry_rng = random.Random(None if settings.seed is None else f"{settings.seed}:entry")
        ttl = timedelta(hours=settings.scratch.ttl_hours)
        pruning = RateLimitedEmbedder(embedder, interval_s=settings.scratch.prune_embed_interval_s,
                                      max_batch=settings.scratch.prune_embed_max_batch)
        exit_gate = ExitGate(pool, embedder, llm, settings, rng, safety,
                             replace(setup or ExitSetup(), prune_embedder=pruning))
        entry = EntryGate(pool, settings.entry, entry_rng, ttl)
        return cls(pool, entry, exit_gate, ScratchLifecycle(pool, exit_gate, settings.scratch),
                   settings)

    async def admit(self, content: str, *, source_tag: str = "external_user",
                    source_confidence: float = 1.0, exchange: bool = True,
                    metadata: dict | None = None, unkept: bool = False,
                    focus: np.ndarray | None = None) -> Admitted:
        """Entry gate for one input, kept with the attention `focus` it was said under when
        known; counts an exchange (the loop's cycle decides when that starts a flush).

        While the memory mode is off, or for an item of an off-mode turn (`unkept`, the
        mode may have changed since), only a placeholder is written (`EntryGate.admit_unkept`)."""
        if self._tuning_read_at is None or time.monotonic() - self._tuning_read_at >= self.TUNING_REFRESH_S:
            await self.load_tuning()
        if unkept or self.mode.off:
            admitted = await self.entry.admit_unkept(content, source_tag=source_tag,
                                                     source_confidence=source_confidence,
                                                     metadata={**(metadata or {}), OFF_TAG: "off"})
        else:
            admitted = await self.entry.admit(content, source_tag=source_tag, source_confidence=source_confidence,
                                              metadata=metadata, focus=focus)
        if exchange:
            self.lifecycle.note_exchange()
        return admitted

    async def note_focus(self, scratch_ids: Sequence[int | None], focus: np.ndarray | None) -> None:
        """These scratch rows were said under `focus` (the loop, when attention takes them into
        a turn): stored with them, the exit gate judges their relevance by it."""
        await scratch.note_focus(self.pool, [i for i in scratch_ids if i is not None], focus)

    async def prune(self, texts: Sequence[str], *, source_tag: str) -> FlushReport:
        """Last chance for messages pruned from the context window (plan §3.3).

        They bypass the entry gate's filter (they were already attended to) but are
        buffered first like everything else, then flushed through the exit gate with
        rate-limited embedding.
        """
        contents = [c for c in (clean_text(t).text for t in texts) if c.strip()]
        if not contents or self.mode.off:     # memory mode off: nothing new is kept
            return FlushReport()
        ttl = timedelta(hours=self.settings.scratch.ttl_hours)
        ids = await scratch.buffer_pruned(self.pool, contents, source_tag, ttl, PREVIEW_CHARS)
        return await self.exit.flush(reason="context pruning", ids=ids, burst=True)

    def confirmation_question(self, now: datetime | None = None) -> str | None:
        """Copilot: the question to ask after an answer, when new items are held.

        None while the memory mode is off: a "y" would write while nothing new may be
        written; the items wait and are asked about once the mode is on again."""
        return None if self.mode.off else self.exit.confirmations.question(now)

    async def answer_confirmation(self, line: str) -> str | None:
        """Copilot: consume `line` when it answers the open question; the reply, or None
        when the line is an ordinary message."""
        confirmations = self.exit.confirmations
        settled = confirmations.take(line)
        if settled is None or isinstance(settled, str):
            return settled
        if self.mode.off:      # switched off after the question was asked
            confirmations.reask()
            return (f"memory mode is off, so nothing is written now: the {len(confirmations)} held "
                    "item(s) stay held (/held lists them) and are asked about again once the mode "
                    "is copilot or autopilot")
        try:
            report = await self.exit.settle(settled)
        except BaseException:  # nothing was written (one transaction): ask again next time
            confirmations.reask()
            raise
        confirmations.settled(settled.ids)
        kept = report.actions.get("persist", 0) + report.actions.get("persist_flag", 0)
        return f"kept {kept}, dropped {report.actions.get('drop', 0)}"

    async def held_text(self, now: datetime | None = None) -> str:
        """`/held`: every item held for the guardian (from the database), and when it is asked."""
        rows = await held_repository.held_items(self.pool)
        return held.listing(rows, now or datetime.now(UTC), mode=self.mode.current)

    async def recover(self, started_at: datetime | None = None) -> FlushReport:
        """Start-up: items earlier runs held wait for the guardian again (whatever the mode);
        then crash recovery (see ScratchLifecycle.recover)."""
        self.held_at_start = await self.exit.load_held()
        return await self.lifecycle.recover(started_at)

    def held_notice(self) -> str | None:
        """The start-up line about items earlier runs held (None: there are none)."""
        n = self.held_at_start
        if not n:
            return None
        they, them = ("it is", "it") if n == 1 else ("they are", "them")
        when = (f"memory mode is off, so {they} kept, not written, and asked about once the mode is "
                f"copilot or autopilot" if self.mode.off else f"I ask about {them} after my next answer")
        return f"{n} memor{'y' if n == 1 else 'ies'} held for your decision before the restart; {when} (/held lists {them})"

    async def shutdown(self) -> FlushReport:
        """Graceful shutdown: flush everything still buffered."""
        return await self.lifecycle.shutdown()
