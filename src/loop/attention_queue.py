"""Attention allocation (plan §3.10) and the cognitive state report (§3.4).

Every cycle the loop collects the pending input candidates (user messages, DMN
thoughts, consolidation insights, gut signals, scheduled tasks) and scores each:

    salience = 0.3·novelty + 0.3·goal_relevance + 0.2·emotional_charge + 0.2·urgency

* novelty = 1 - max cosine to the recent context (1.0 when there is no context
  yet; 0.5 for a candidate without an embedding: unknown, neither new nor familiar);
* goal_relevance = max cosine to the active goal vectors, clipped to [0, 1]
  (0 when there are no goals, or no embedding);
* emotional_charge = |gut delta| as the caller measured it, clipped to [0, 1];
* urgency = the candidate's current urgency, by default per source: user 0.8,
  DMN 0.2, gut 0.4 (the plan's), scheduled 0.6 and consolidation 0.3 (ours: an
  operator-scheduled task is closer to a user request than to a stray thought; a
  consolidation insight is a little more pressing than a DMN association, since
  it was distilled from evidence, but less than a gut spike).

The highest salience wins and becomes the cycle's input. Ties (equal to 1e-9)
go to the source a person is most likely waiting on (user, scheduled, gut,
consolidation, DMN: the default urgency order), then to the older candidate,
then to the lower id, so an allocation never depends on list order.

Losers stay queued with decayed urgency, ``max(min(u, floor), u·decay)``
(``decay`` 0.8, ``floor`` 0.05 by default) and are scored again next cycle,
against the context the winner has since changed. This decays user messages
too, as the plan says; a gut spike sustained over many cycles could therefore
keep a user waiting, and the state report makes that visible to the LLM.

This module is pure: no I/O, no clocks (``enqueued_at`` is set by the caller).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np

from src.gates.modes import unkept_text
from src.loop.settings import DEFAULT_URGENCY, AttentionSettings, SalienceWeights, Source
from src.text import excerpt
from src.tokens import count_tokens
from src.vectors import unit, unit_rows

SOURCES: tuple[Source, ...] = ("user", "scheduled", "gut", "consolidation", "dmn")

#: Source tags of plan §3.4 (soft metadata on every input).
SOURCE_TAGS: Mapping[Source, str] = {
    "user": "external_user", "dmn": "internal_dmn", "consolidation": "internal_consolidation",
    "gut": "internal_gut", "scheduled": "internal_scheduled",
}
#: How much the provenance is trusted. Self-generated impulses start lower, so
#: action checks that ask for high confidence hold them back (plan §3.4).
DEFAULT_SOURCE_CONFIDENCE: Mapping[Source, float] = {
    "user": 1.0, "scheduled": 1.0, "consolidation": 0.7, "gut": 0.5, "dmn": 0.5,
}
#: Names in the state report, as plan §3.4 writes them.
SOURCE_LABELS: Mapping[Source, str] = {
    "user": "User message", "dmn": "DMN thought", "consolidation": "Consolidation insight",
    "gut": "Gut signal", "scheduled": "Scheduled task",
}
#: Why the winner won, by the component that contributed most to its lead.
WINNER_REASONS: Mapping[str, str] = {
    "novelty": "novelty", "goal_relevance": "goal relevance",
    "emotional_charge": "emotional charge", "urgency": "urgency bias applied",
}
COMPONENT_NAMES: tuple[str, ...] = ("novelty", "goal_relevance", "emotional_charge", "urgency")
_TIE = 1e-9
_SPACE = re.compile(r"\s+")



@dataclass(frozen=True)
class Candidate:
    """One pending input competing for attention."""

    source: Source
    text: str
    embedding: np.ndarray | None
    urgency: float
    source_tag: str
    source_confidence: float
    enqueued_at: datetime
    emotional_charge: float = 0.0
    id: int | None = None            # set by AttentionQueue.push
    unkept: bool = False             # arrived while the memory mode was off: tables keep a placeholder
    channel: str = "terminal"        # a user message's channel: terminal | api | page | mcp (sql/161)

    @property
    def record_text(self) -> str:
        """The text as tables keep it: the placeholder for an off-mode input (src/gates/modes.py)."""
        return unkept_text(self.text) if self.unkept else self.text

    @classmethod
    def of(cls, source: Source, text: str, *, enqueued_at: datetime,
           embedding: np.ndarray | None = None, urgency: float | None = None,
           emotional_charge: float = 0.0, source_confidence: float | None = None,
           settings: AttentionSettings | None = None) -> Candidate:
        """A candidate with the defaults of its source (urgency, tag, confidence)."""
        if source not in SOURCE_TAGS:
            raise ValueError(f"unknown attention source {source!r}; expected one of {', '.join(SOURCES)}")
        cfg = settings or AttentionSettings()
        return cls(
            source=source, text=text, embedding=embedding,
            urgency=cfg.urgency.get(source, DEFAULT_URGENCY[source]) if urgency is None else urgency,
            source_tag=SOURCE_TAGS[source],
            source_confidence=(DEFAULT_SOURCE_CONFIDENCE[source] if source_confidence is None
                               else source_confidence),
            enqueued_at=enqueued_at, emotional_charge=emotional_charge)

    @property
    def label(self) -> str:
        return SOURCE_LABELS[self.source]


class Components(NamedTuple):
    novelty: float
    goal_relevance: float
    emotional_charge: float
    urgency: float

    def salience(self, weights: SalienceWeights) -> float:
        return sum(getattr(weights, name) * value for name, value in zip(COMPONENT_NAMES, self, strict=True))


class Scored(NamedTuple):
    candidate: Candidate
    salience: float
    components: Components


@dataclass(frozen=True)
class Allocation:
    """One cycle's competition: the winner, everyone ranked, the losers to re-queue."""

    winner: Candidate | None
    ranked: list[Scored]                   # best first; ranked[0] is the winner
    losers: list[Candidate]                # urgency already decayed, ready for the next cycle
    reason: str                            # the "Winner:" explanation of the state report
    decisive: str | None                   # component that decided, None: tie / sole / empty

    def candidates_json(self) -> list[dict[str, Any]]:
        """The candidates as thought_log stores them: [{source, text, salience, ...}]."""
        return [{"id": s.candidate.id, "source": s.candidate.source, "source_tag": s.candidate.source_tag,
                 "text": s.candidate.record_text[:500], "salience": round(s.salience, 4),
                 "components": {k: round(v, 4) for k, v in s.components._asdict().items()},
                 "won": i == 0}
                for i, s in enumerate(self.ranked)]


def _unit_rows(vecs: Iterable[np.ndarray] | np.ndarray | None) -> np.ndarray | None:
    """Unit rows, or None when there are none (no context yet, no goals)."""
    if vecs is None:
        return None
    rows = [np.asarray(v, dtype=np.float64).ravel() for v in vecs]
    return unit_rows(rows) if rows else None


def _max_cosine(vec: np.ndarray, rows: np.ndarray) -> float:
    v = unit(vec)
    if rows.shape[1] != v.shape[0]:
        raise ValueError(f"candidate embedding has {v.shape[0]} dimensions, context vectors {rows.shape[1]}")
    return float(np.max(rows @ v))


def _clip(x: float) -> float:
    return min(1.0, max(0.0, float(x)))


def salience_components(candidate: Candidate, recent_context_vecs: np.ndarray | Sequence[np.ndarray] | None,
                        goal_vecs: np.ndarray | Sequence[np.ndarray] | None) -> Components:
    """The four components of §3.10 for one candidate, each in [0, 1]."""
    context, goals = _unit_rows(recent_context_vecs), _unit_rows(goal_vecs)
    return _components(candidate, context, goals)


def _components(candidate: Candidate, context: np.ndarray | None, goals: np.ndarray | None) -> Components:
    emb = candidate.embedding
    if emb is None:
        novelty, goal = 0.5, 0.0
    else:
        novelty = 1.0 if context is None else _clip(1.0 - _max_cosine(emb, context))
        goal = 0.0 if goals is None else _clip(_max_cosine(emb, goals))
    return Components(novelty, goal, _clip(candidate.emotional_charge), _clip(candidate.urgency))


def compute_salience(candidate: Candidate, recent_context_vecs: np.ndarray | Sequence[np.ndarray] | None,
                     goal_vecs: np.ndarray | Sequence[np.ndarray] | None,
                     weights: SalienceWeights | None = None) -> float:
    """0.3·novelty + 0.3·goal_relevance + 0.2·emotional_charge + 0.2·urgency (plan §3.10)."""
    return salience_components(candidate, recent_context_vecs, goal_vecs).salience(weights or SalienceWeights())


def decay_urgency(candidate: Candidate, decay: float, floor: float) -> Candidate:
    """The candidate one cycle older: urgency × decay, never below `floor` (unless it started there)."""
    u = candidate.urgency
    return replace(candidate, urgency=max(min(u, floor), u * decay))


def _order_key(scored: Scored) -> tuple:
    c = scored.candidate
    return (-round(scored.salience / _TIE), SOURCES.index(c.source), c.enqueued_at,
            -1 if c.id is None else c.id)


def _why(ranked: list[Scored], weights: SalienceWeights) -> tuple[str, str | None]:
    if not ranked:
        return "none (nothing pending)", None
    if len(ranked) == 1:
        return "only candidate", None
    first, second = ranked[0], ranked[1]
    if first.salience - second.salience <= _TIE:
        if first.candidate.source != second.candidate.source:
            return "tie, broken by source priority", None
        return "tie, broken by arrival order", None
    leads = {name: getattr(weights, name) * (a - b)
             for name, a, b in zip(COMPONENT_NAMES, first.components, second.components, strict=True)}
    decisive = max(COMPONENT_NAMES, key=lambda name: (leads[name], -COMPONENT_NAMES.index(name)))
    return WINNER_REASONS[decisive], decisive


def allocate(candidates: Sequence[Candidate],
             recent_context_vecs: np.ndarray | Sequence[np.ndarray] | None = None,
             goal_vecs: np.ndarray | Sequence[np.ndarray] | None = None,
             settings: AttentionSettings | None = None) -> Allocation:
    """Score every candidate, pick the most salient, decay the losers (plan §3.10).

    The "Winner:" reason names the component that contributed most to the
    winner's lead over the runner-up (weight × difference): "urgency bias
    applied", "emotional charge", "novelty" or "goal relevance"; "only
    candidate" when there was no competition, "tie, broken by …" on a tie.
    """
    cfg = settings or AttentionSettings()
    context, goals = _unit_rows(recent_context_vecs), _unit_rows(goal_vecs)
    scored = []
    for c in candidates:
        comps = _components(c, context, goals)
        scored.append(Scored(c, comps.salience(cfg.weights), comps))
    ranked = sorted(scored, key=_order_key)
    reason, decisive = _why(ranked, cfg.weights)
    losers = [decay_urgency(s.candidate, cfg.decay, cfg.urgency_floor) for s in ranked[1:]]
    return Allocation(ranked[0].candidate if ranked else None, ranked, losers, reason, decisive)


def _report_line(scored: Scored, text_chars: int) -> str:
    c = scored.candidate
    text = excerpt(c.text, text_chars)
    # A gut signal is a felt description the gut module wrote, not words anyone
    # said or thought, so it is not quoted (as in the plan's example).
    shown = text if c.source == "gut" else f'"{text}"'
    return f"  - {c.label}: {shown} (salience: {scored.salience:.2f})"


def cognitive_state_report(allocation: Allocation, settings: AttentionSettings | None = None) -> str:
    """The [COGNITIVE STATE] block of plan §3.4, injected before each LLM call.

    Candidates are listed best first. Lines that would take the block past
    `report_max_tokens` are summarised in one "… more" line, so the block stays
    small whatever the queue holds.
    """
    cfg = settings or AttentionSettings()
    head = ["[COGNITIVE STATE]", "Attention candidates this cycle:"]
    winner = (f"Winner: {allocation.winner.label} ({allocation.reason})" if allocation.winner
              else f"Winner: {allocation.reason}")
    if not allocation.ranked:
        return "\n".join([*head, "  (none)", winner])
    # Every line costs tokens, so no more lines than tokens can fit; the longest prefix
    # that fits is found by bisection (under a flood of waiting messages the old
    # one-line-at-a-time search held up every cycle).
    ranked = allocation.ranked[:cfg.report_max_tokens]
    lines = [_report_line(s, cfg.report_text_chars) for s in ranked]

    def render(shown: int) -> str:
        rest = allocation.ranked[shown:]
        tail = ([f"  - … {len(rest)} more, salience {rest[-1].salience:.2f}–{rest[0].salience:.2f}"]
                if rest else [])
        return "\n".join([*head, *lines[:shown], *tail, winner])

    low, high = 1, len(lines)          # render(low) is the fallback; find the largest that fits
    while low < high:
        mid = (low + high + 1) // 2
        if count_tokens(render(mid)) <= cfg.report_max_tokens:
            low = mid
        else:
            high = mid - 1
    return render(low)


class AttentionQueue:
    """Pending candidates between cycles, bounded (in memory; the loop owns it).

    When full, pushing evicts the internal impulse (DMN, consolidation, gut,
    scheduled) with the lowest current urgency, the oldest among equals ("drop
    oldest-lowest"); the new candidate itself can be the one evicted. User messages
    are never evicted (nothing the user says is lost): when only they are queued the queue grows past
    `queue_max`, and the loop takes waiting messages together as one turn.
    `dropped` counts evictions per source (shown by /status).
    """

    def __init__(self, settings: AttentionSettings | None = None):
        self.settings = settings or AttentionSettings()
        self._pending: list[Candidate] = []
        self._ids = itertools.count(1)
        self.dropped: dict[str, int] = {s: 0 for s in SOURCES}

    def __len__(self) -> int:
        return len(self._pending)

    def pending(self) -> tuple[Candidate, ...]:
        return tuple(self._pending)

    def counts(self) -> dict[str, int]:
        """Pending candidates per source (for /status)."""
        out = {s: 0 for s in SOURCES}
        for c in self._pending:
            out[c.source] += 1
        return out

    def stamp(self, candidate: Candidate) -> Candidate:
        """`candidate` with a queue id (kept if it has one), so callers can track it."""
        return candidate if candidate.id is not None else replace(candidate, id=next(self._ids))

    def push(self, candidate: Candidate) -> Candidate | None:
        """Queue `candidate` (an id is assigned); return the evicted candidate, if any."""
        candidate = self.stamp(candidate)
        self._pending.append(candidate)
        if len(self._pending) <= self.settings.queue_max:
            return None
        pool = [c for c in self._pending if c.source != "user"]
        if not pool:
            return None
        victim = min(pool, key=lambda c: (c.urgency, c.enqueued_at, c.id))
        self._pending.remove(victim)
        self.dropped[victim.source] += 1
        return victim

    def take(self, source: Source, limit: int, channel: str | None = None) -> list[Candidate]:
        """Remove and return up to `limit` pending candidates of `source` (and of `channel`
        when given), oldest first."""
        mine = sorted((c for c in self._pending if c.source == source and channel in (None, c.channel)),
                      key=lambda c: (c.enqueued_at, c.id))[:max(0, limit)]
        taken = {c.id for c in mine}
        self._pending = [c for c in self._pending if c.id not in taken]
        return mine

    def rewrite(self, text: Callable[[str], str]) -> int:
        """Pass every pending candidate's text through `text` (a forget replaces forgotten
        words with their placeholder, src/loop/forgetting.py); how many changed. The
        candidate stays: a message still gets its answer."""
        changed = 0
        out = []
        for c in self._pending:
            new = text(c.text)
            if new != c.text:
                c, changed = replace(c, text=new), changed + 1
            out.append(c)
        self._pending = out
        return changed

    def attach_embeddings(self, vectors: Mapping[int, np.ndarray]) -> None:
        """Give pending candidates their embeddings (the loop embeds them in one batch)."""
        self._pending = [replace(c, embedding=vectors[c.id]) if c.id in vectors else c
                         for c in self._pending]

    def raise_charges(self, charge: Callable[[np.ndarray | None], float]) -> None:
        """Set each pending candidate's emotional charge to the gut's reading of it (plan
        §3.10: |gut delta| replaces the placeholder), keeping any higher charge it came with."""
        self._pending = [replace(c, emotional_charge=max(c.emotional_charge, charge(c.embedding)))
                         for c in self._pending]

    def allocate(self, recent_context_vecs: np.ndarray | Sequence[np.ndarray] | None = None,
                 goal_vecs: np.ndarray | Sequence[np.ndarray] | None = None) -> Allocation | None:
        """Run one cycle's competition over everything pending; losers stay, decayed."""
        if not self._pending:
            return None
        result = allocate(self._pending, recent_context_vecs, goal_vecs, self.settings)
        self._pending = list(result.losers)
        return result


__all__ = [
    "DEFAULT_SOURCE_CONFIDENCE", "DEFAULT_URGENCY", "SOURCES", "SOURCE_LABELS", "SOURCE_TAGS",
    "Allocation", "AttentionQueue", "Candidate", "Components",
    "Scored", "Source", "allocate", "cognitive_state_report", "compute_salience", "decay_urgency",
    "salience_components",
]
