"""Context assembly (plan §3.2): which memories the model sees this cycle, and in what form.

Three sections, each with its own budget (the table of §3.2, `ContextBudget`):

    immutable     always, full text (~100 tokens); the one hard exception
    identity      Track 2: top-N by center, observed, full text above 0.6; own cap;
                  plus one line of session-restart stats (plan §4.9)
    situational   Track 1: observe × hybrid relevance, filled top-down (~2000 tokens)

The arithmetic is in `src/context/tracks.py`; this module reads rows,
calls it, records co-access and renders an `AssembledContext`.

Candidates (plan §15 open question 1). Scoring every memory every cycle does not
scale; Track 1 scores only what recall already pre-filtered: the Retrieval's
`memories` and `near_misses` (its top-`limit`, itself drawn from the top
`candidates` of each search arm). Raise `retrieval.limit` for a wider field.

Identity candidates. "Top-N by center" orders by alpha / (alpha + beta), which no
index may serve: retrieval rewrites those columns every cycle and the table
depends on HOT updates (sql/002, notes.md), so an index on them (or on an
expression of them) would turn every write-back into index inserts. The top-N
is therefore one full scan, cached in `IdentityCache` and repeated every
`identity_refresh_cycles` cycles, after pruning, or when the loop asks
(`invalidate`, e.g. after deep consolidation). Between refreshes the cached ids'
*current* alpha/beta (and the immutable rows) are re-read in one indexed query
per cycle, so every roll uses today's weights; only membership of the top-N can
lag by up to K cycles. The scan costs far more than a cycle without it (notes.md), so K
spreads it over K cycles; raise K as the store grows. Immutable memories are not identity candidates: they are
always injected anyway and would crowd real identity out of the top-N. An identity
candidate that did not roll in this cycle still competes in Track 1 like any memory;
one that did is not injected twice.

Co-access. The plan records it in Track 1 ("record co-access for Hebbian
learning"): the situational memories injected together are paired. Identity and
immutable memories are not paired with them: they are present regardless of the
situation, so pairing them would make the identity set every memory's top
co-access partner and drown what spreading activation is meant to find. Pairs
that recall already counted (retrieved together, with `mutate`) count again here:
retrieved together and injected together are two events, as in the plan.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np

from src.context import tracks
from src.context.prompts import IDENTITY_HEADER, IMMUTABLE_HEADER, SITUATIONAL_HEADER
from src.context.settings import ContextBudget, ContextSettings
from src.context.situational import others_left_out, situational_candidates, working_lines
from src.db.deferred import Deferred
from src.db.sql import Executor
from src.recall.co_access import co_access_pairs, record_co_access
from src.recall.retrieval import Retrieval
from src.recall.speakers import speaker_of
from src.recall.when import memory_time, said_when

log = logging.getLogger(__name__)



# memory_standing (sql/141): its center index walks the top-N, never the whole store
_TOP_BY_CENTER = """
SELECT id, center
FROM memory_standing
WHERE NOT immutable AND center >= $2::float8
ORDER BY center DESC, id
LIMIT $1::int
"""

_IDENTITY_ROWS = """
SELECT id, content, compressed, memory_type, depth_weight_alpha AS alpha,
       depth_weight_beta AS beta, immutable, source_tag, metadata, event_time, created_at
FROM memories
WHERE immutable OR id = ANY($1::bigint[])
ORDER BY id
"""



@dataclass(frozen=True)
class ContextSection:
    """One rendered section. `tokens` is the budget accounting (header + each line
    + its line break, `context_tracks.section_tokens`), never below a count of `text`."""

    name: tracks.Track
    text: str                       # "" when nothing was injected
    tokens: int
    budget: int
    entries: tuple[tracks.Placed, ...]
    extra: tuple[str, ...] = ()     # lines without a memory (session stats, working memory)

    @property
    def ids(self) -> list[int]:
        return [p.id for p in self.entries]


@dataclass(frozen=True)
class IdentityRows:
    """The identity candidates' ids (top-N by center, cached), whether the scan was redone,
    and their rows with current weights: the reads assembly starts from."""

    ids: list[int]
    refreshed: bool
    rows: list[Any]


@dataclass(frozen=True)
class AssembledContext:
    """What assembly put in the context this cycle, and why."""

    immutable: ContextSection
    identity: ContextSection
    situational: ContextSection
    budget: ContextBudget
    identity_observed: dict[int, float]
    identity_dropped_for_cap: list[int]
    situational_no_room: list[int]
    candidates: int
    inertia: tracks.InertiaState | None
    cycle: int
    identity_refreshed: bool
    co_access_pairs: int                  # pairs of placed memories its co-access write records
    writes: tuple[Deferred, ...] = ()     # that write, not yet run (src/db/deferred.py)

    @property
    def sections(self) -> tuple[ContextSection, ContextSection, ContextSection]:
        return (self.immutable, self.identity, self.situational)

    @property
    def ids_by_track(self) -> dict[str, list[int]]:
        return {s.name: s.ids for s in self.sections}

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.sections)

    @property
    def text(self) -> str:
        """The memory part of the system prompt: non-empty sections, blank line between."""
        return "\n\n".join(s.text for s in self.sections if s.text)

    @property
    def conversation_budget(self) -> int:
        """Room left for the conversation this cycle (>= budget.conversation_tokens unless
        the immutable set overflows its ~100 tokens)."""
        b = self.budget
        return b.context_window - self.tokens - b.cognitive_state - b.output_reserve

    def summary(self) -> dict[str, Any]:
        """JSON-ready record for thought_log.context_summary."""
        return {
            "cycle": self.cycle,
            "tokens": {s.name: s.tokens for s in self.sections} | {"total": self.tokens},
            "budgets": {s.name: s.budget for s in self.sections},
            "ids": self.ids_by_track,
            "situational": [{"id": p.id, "score": round(p.score, 4), "form": p.form}
                            for p in self.situational.entries],
            "situational_no_room": self.situational_no_room,
            "candidates": self.candidates,
            # the identity track's tokens against the plan's average (~1500), not only its cap
            "identity_expected": self.budget.identity_expected,
            "identity_rolls": {str(k): round(v, 4) for k, v in self.identity_observed.items()},
            "identity_dropped_for_cap": self.identity_dropped_for_cap,
            "identity_refreshed": self.identity_refreshed,
            "inertia": None if self.inertia is None else {
                "shift": None if self.inertia.shift is None else round(self.inertia.shift, 4),
                "inertia": self.inertia.inertia},
            "co_access_pairs": self.co_access_pairs,
            "conversation_budget": self.conversation_budget,
        }


class IdentityCache:
    """The top-N non-immutable memories by center, re-scanned every `refresh_every` calls.

    `candidates` refreshes on the first call, then on calls K+1, 2K+1, …, or on
    the next call after `invalidate()` / with `force=True`.
    """

    def __init__(self, top_n: int = 20, refresh_every: int = 20, min_center: float = 0.0):
        if refresh_every < 1:
            raise ValueError(f"refresh_every must be >= 1, got {refresh_every!r}")
        self.top_n = top_n
        self.min_center = min_center
        self.refresh_every = refresh_every
        self.refreshes = 0
        self._entries: list[tuple[int, float]] | None = None
        self._age = 0

    def invalidate(self) -> None:
        """Re-scan on the next call (after deep consolidation, promotion, pruning)."""
        self._entries = None

    @property
    def entries(self) -> list[tuple[int, float]]:
        """(id, center at the last refresh), highest center first; [] before the first."""
        return list(self._entries or [])

    async def candidates(self, db: Executor, *, force: bool = False) -> tuple[list[int], bool]:
        """(candidate ids, whether this call re-scanned)."""
        refreshed = force or self._entries is None or self._age >= self.refresh_every
        if refreshed:
            rows = (await db.fetch(_TOP_BY_CENTER, self.top_n, self.min_center)
                    if self.top_n else [])
            self._entries = [(r["id"], float(r["center"])) for r in rows]
            self._age = 0
            self.refreshes += 1
        self._age += 1
        return [mid for mid, _ in self._entries or []], refreshed


def _section(name: tracks.Track, header: str, placed: Sequence[tracks.Placed], budget: int,
             extra: Sequence[str] = ()) -> ContextSection:
    tokens = tracks.section_tokens(header, [*extra, *(p.text for p in placed)])
    return ContextSection(name, tracks.render_section(header, placed, extra), tokens, budget,
                          tuple(placed), tuple(extra))


def _candidate(row: asyncpg.Record, now: datetime) -> tracks.ContextCandidate:
    return tracks.ContextCandidate(row["id"], row["content"], row["memory_type"], row["alpha"],
                                   row["beta"], row["compressed"], 1.0, row["immutable"],
                                   speaker_of(row["source_tag"], row["metadata"]),
                                   said_when(memory_time(row["event_time"], row["created_at"]), now))


class ContextAssembler:
    """One per process: holds the identity cache and the previous attention vector."""

    def __init__(self, pool: asyncpg.Pool, settings: ContextSettings | None = None, *,
                 broadening: Callable[[], float | None] | None = None):
        self.pool = pool
        self.settings = settings or ContextSettings()
        # Phase C's broadened sampling (Safety.sampling_evidence_cap): the evidence cap of the draws
        self.broadening = broadening or (lambda: None)
        # in tokens: the model's window when the caller resolved it (src/context/request.py)
        self.budget = self.settings.budget.resolve()
        self.identity_cache = IdentityCache(self.settings.identity_top_n,
                                            self.settings.identity_refresh_cycles,
                                            self.settings.identity_min_center)
        self.cycle = 0
        self._previous: np.ndarray | None = None
        self._inertia: tracks.InertiaState | None = None
        self._warned_immutable = False

    def focus(self, current: np.ndarray) -> tracks.InertiaState:
        """Blend this cycle's attention embedding with the last (context inertia).

        Call before recall and pass `.vector` as the retrieval's `context_vecs`, so
        the previous focus bleeds into this cycle's activation.
        """
        cfg = self.settings
        state = tracks.blend_attention(current, self._previous, big_shift=cfg.big_shift,
                                       inertia_after_big_shift=cfg.inertia_after_big_shift,
                                       inertia=cfg.inertia)
        self._previous = state.vector
        self._inertia = state
        return state

    def reset_focus(self) -> None:
        """Forget the previous attention (e.g. after a long idle gap)."""
        self._previous = None
        self._inertia = None

    async def read_identity(self, *, refresh: bool = False) -> IdentityRows:
        """The identity candidates and their current rows. `refresh` re-scans the top-N first
        (after FIFO pruning: the plan re-runs injection so identity resurfaces from current
        weights)."""
        ids, refreshed = await self.identity_cache.candidates(self.pool, force=refresh)
        return IdentityRows(ids, refreshed, await self.pool.fetch(_IDENTITY_ROWS, ids))

    async def assemble(self, retrieval: Retrieval | None, *, rng: np.random.Generator,
                       now: datetime, session: tracks.SessionStats | None = None,
                       refresh_identity: bool = False,
                       identity: Awaitable[IdentityRows] | None = None,
                       users_question: str = "") -> AssembledContext:
        """Build this cycle's memory context.

        `identity`: `read_identity` already started (the loop starts it as recall's search
        returns); else read here, with `refresh_identity`. Draws from `rng` in a fixed
        order: identity rolls, then situational scores. The co-access of the placed
        memories comes back in `writes`, not run (src/db/deferred.py). `users_question`: the
        user's message when it asks about the user (`others_left_out`).
        """
        cfg, budget = self.settings, self.budget
        self.cycle += 1
        read = await (identity if identity is not None else self.read_identity(refresh=refresh_identity))
        ids, refreshed, rows = read.ids, read.refreshed, read.rows
        by_id = {r["id"]: _candidate(r, now) for r in rows}

        im_placed = []
        for c in (c for c in by_id.values() if c.immutable):
            line = tracks.render_line(c.memory_type, c.content)
            im_placed.append(tracks.Placed(c.id, "immutable", "full", 1.0, line,
                                           tracks.line_tokens(line)))
        im_section = _section("immutable", IMMUTABLE_HEADER, im_placed, budget.immutable)
        if im_section.tokens > budget.immutable and not self._warned_immutable:
            self._warned_immutable = True
            log.warning("immutable memories take %d tokens, over their budget of %d; injected "
                        "whole anyway (they are never dropped)", im_section.tokens, budget.immutable)

        stats = [tracks.session_stats_line(session, now)] if session is not None else []
        reserved = tracks.section_tokens(IDENTITY_HEADER, stats)
        identity_cands = [by_id[i] for i in ids if i in by_id and not by_id[i].immutable]
        cap = self.broadening()
        roll = tracks.roll_identity(identity_cands, rng, threshold=cfg.identity_threshold,
                                    cap_tokens=budget.identity_cap, reserved_tokens=reserved, evidence_cap=cap)
        if roll.dropped_for_cap:
            log.info("identity roll over its cap of %d tokens: dropped memories %s whole",
                     budget.identity_cap, roll.dropped_for_cap)
        id_section = _section("identity", IDENTITY_HEADER, roll.placed, budget.identity_cap, stats)

        injected = {p.id for p in im_placed} | {p.id for p in roll.placed}
        cands = others_left_out(situational_candidates(retrieval, injected, now, cfg.recall_first),
                                retrieval, users_question)
        scores = tracks.injection_scores(cands, rng, evidence_cap=cap)
        # what was just said and matches (working memory) leads the situational track and
        # takes its tokens first: the next message must be able to use the last one
        working = working_lines(retrieval, budget.situational, now)
        filled = tracks.fill_situational(
            cands, scores, budget.situational - tracks.section_tokens("", working),
            header=SITUATIONAL_HEADER, full_text_ratio=cfg.full_text_ratio,
            compressed_max_chars=cfg.compressed_max_chars, min_score=cfg.min_injection_score)
        sit_section = _section("situational", SITUATIONAL_HEADER, filled.placed, budget.situational, working)

        placed = [p.id for p in filled.placed]
        co_access = self._co_access(placed, now)
        return AssembledContext(
            im_section, id_section, sit_section, budget, roll.observed, roll.dropped_for_cap,
            filled.skipped_no_room, len(cands), self._take_inertia(), self.cycle, refreshed,
            co_access_pairs(placed) if co_access else 0, co_access)

    def _co_access(self, placed: list[int], now: datetime) -> tuple[Deferred, ...]:
        """The placed situational memories were active together (plan §3.1): their pairs'
        write, to be queued or run by the caller (none for fewer than two)."""
        if not self.settings.record_co_access or len(placed) < 2:
            return ()
        return (Deferred("context co-access", functools.partial(record_co_access, self.pool, placed, now),
                         lane="co-access"),)

    def _take_inertia(self) -> tracks.InertiaState | None:
        # Reported once, for the cycle whose focus() produced it.
        state, self._inertia = self._inertia, None
        return state


__all__ = ["AssembledContext", "ContextAssembler", "ContextBudget", "ContextSection",
           "ContextSettings", "IdentityCache", "IdentityRows"]
