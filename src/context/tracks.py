"""The pure half of context assembly (plan §3.2): scoring, filling, rolling, inertia.

No I/O here: `src/context/assembly.py` reads the rows and calls these
functions with the caller's `numpy.random.Generator`, so a seeded test (or a
replayed cycle) gets the same context.

Track 1, situational (`fill_situational`). Every candidate gets
``injection_score = observe(Beta(alpha, beta)) × hybrid relevance``. Sorted best
first, candidates fill the budget top-down — after recall's best for the question (its
first `context.recall_first`, 2; `ContextCandidate.recalled`), which go first in recall's
order, in full text where it fits. Recall has already weighed them (ACT-R, its noise, the
Dirichlet blend, the user's own words for a question about the user); a second draw from a
young store's Beta(1.2, 4.1) spans 0.01–0.6 and decided alone: in run H of the local
model's script (bench/local_model_script.py) recall put "Next month I'm going to walk the
West Highland Way." first for "Which long walk am I doing next month?", the draw left it
out of the context, and the model answered that it had no information. The competition
decides the rest (with all five of recall's placed first, two of the six emotional memories
of tests/test_context_assembly.py's 120-token track surfaced 0 and 1 times in 20). The form
of an entry:

- **full text** when its score is at least ``full_text_ratio`` (0.5) of the best
  score this cycle *and* the full text still fits. Relative to the best, because
  absolute scores drift with the store (a young store's weights are Beta(1, 4),
  center 0.2; a mature one's are higher): the best candidate always gets full
  text, and so does anything close to it;
- otherwise the **compressed** form: the row's `compressed` column (written by the
  exit gate, re-written by consolidation), or, when that is NULL, the first
  sentence of the content cut at ``compressed_max_chars`` (200) on a word
  boundary with "…" (`first_sentence`). A compressed form that is not shorter
  than the full text is the full text;
- an entry that does not fit in either form is skipped and the scan goes on:
  a shorter, lower-scoring memory can still use the room that is left.

Track 2, identity (`roll_identity`). Each identity candidate (top-N by center)
is observed once; above ``threshold`` (0.6) its FULL text is injected, below it
is absent this cycle. Identity text is never truncated or summarised. The track
has its own variable budget; only when the rolled set exceeds the hard cap are
whole memories dropped, lowest observed value first, until the rest fits. An
identity memory larger than the cap by itself can therefore never appear (it is
reported in ``dropped_for_cap`` every time it rolls in).

Speakers (issue 27). Every line names who said the memory (`render_line`, src/recall/
speakers.py): "- [episodic] The user said: Hi! My name is Priya…", "I said: …", "I
thought: …", "Priya said: …"; the compressed form too. A line without its speaker reads
as the mind's own words: a small model shown "- [episodic] Hi! My name is Priya Raman"
under "Who I am" answered as Priya. The immutable boundaries are nobody's utterance and
are shown as they are.

Inertia (`blend_attention`). ``shift = 1 - cos(current, previous)``; inertia is
0.05 when shift > 0.7 (a new topic flushes the old context) else 0.3; the
attention vector is ``normalise((1 - inertia)·current + inertia·previous)``.
``previous`` is the previous *blended* vector, so an old focus fades
geometrically (0.3, 0.09, 0.027 … of it) instead of vanishing after one cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Literal, Protocol

import numpy as np

from src.recall.speakers import Speaker, attributed
from src.text import first_sentence
from src.tokens import count_tokens
from src.vectors import has_direction, unit
from src.weights.stochastic import observe_many

Track = Literal["immutable", "identity", "situational"]
Form = Literal["full", "compressed"]



@dataclass(frozen=True)
class ContextCandidate:
    """A memory competing for context space, with what the tracks need of it."""

    id: int
    content: str
    memory_type: str
    alpha: float
    beta: float
    compressed: str | None = None
    relevance: float = 1.0          # hybrid relevance in [0, 1] (Track 1 only)
    immutable: bool = False
    speaker: Speaker | None = None  # who said it (src/recall/speakers.py); None: shown as it is
    when: str = ""                  # when it was said, in words (src/recall/when.py); "": timeless
    until: str = ""                 # superseded by an update: the date it held until; "": current
    recalled: bool = False          # recall kept it for the question: placed first, in the order given


@dataclass(frozen=True)
class Placed:
    """One memory as injected: its rendered line and what it costs."""

    id: int
    track: Track
    form: Form
    score: float                    # injection score (situational) or observed weight (identity)
    text: str                       # the rendered line, "- [type] The user said: …"
    tokens: int


@dataclass(frozen=True)
class Situational:
    placed: list[Placed]
    skipped_no_room: list[int]      # candidates that fit in no form
    below_min_score: list[int]


@dataclass(frozen=True)
class IdentityRoll:
    placed: list[Placed]            # injected, highest observed first
    observed: dict[int, float]      # every candidate's draw this cycle
    dropped_for_cap: list[int]      # rolled in, dropped whole for the hard cap


@dataclass(frozen=True)
class InertiaState:
    """The cycle's attention vector after inertia; `shift` is None on the first cycle."""

    vector: np.ndarray
    shift: float | None
    inertia: float


class SessionStats(Protocol):
    """What plan §4.9 puts in the identity context (src/db/manifest.Manifest has it)."""

    age_days: float
    times_restarted: int
    uptime_total_hours: float
    last_started_at: datetime | None


@lru_cache(maxsize=4096)
def _cached_tokens(line: str) -> int:
    return count_tokens(line)


def line_tokens(line: str) -> int:
    """count_tokens, memoised for lines up to 20k characters: identity memories recur
    every cycle and counting is the costliest step of assembly."""
    return _cached_tokens(line) if len(line) <= 20_000 else count_tokens(line)


def section_tokens(header: str, lines: Sequence[str]) -> int:
    """Tokens of `render_section`: the header plus each line and its line break.

    This is the accounting every budget is filled with. Counting the joined text
    again can only come out lower (the estimate is subadditive over line breaks;
    tested), so a section never exceeds its budget and is not counted twice.
    """
    if not lines:
        return 0
    return line_tokens(header) + sum(line_tokens(line) + 1 for line in lines)


def render_line(memory_type: str, text: str, speaker: Speaker | None = None, when: str = "",
                until: str = "") -> str:
    """One injected memory as a context line, by whom and when it was said in words (issue 27,
    37: "- [episodic] The user said: Hi! My name is Priya… (Wed 25 Nov 2026, 3 days ago)",
    never the bare words the model would take as its own). A statement a newer one updated
    says first until when it held ("- [episodic] until 28 Nov 2026: The user said: …",
    src/recall/current.py): the model must not take it as current."""
    dated = f" ({when})" if when else ""
    held = f"until {until}: " if until else ""
    return f"- [{memory_type}] {held}{attributed(text, speaker)}{dated}"


def compressed_form(candidate: ContextCandidate, max_chars: int) -> str:
    """The stored `compressed` text when there is one, else `first_sentence`."""
    stored = (candidate.compressed or "").strip()
    return " ".join(stored.split()) if stored else first_sentence(candidate.content, max_chars)


def injection_scores(candidates: Sequence[ContextCandidate], rng: np.random.Generator, *,
                     evidence_cap: float | None = None) -> np.ndarray:
    """observe(Beta(alpha, beta)) × hybrid relevance, one draw per candidate (`evidence_cap`:
    broadened sampling, `observe_many`)."""
    if not candidates:
        return np.zeros(0)
    alpha = np.array([c.alpha for c in candidates], dtype=float)
    beta = np.array([c.beta for c in candidates], dtype=float)
    relevance = np.clip(np.array([c.relevance for c in candidates], dtype=float), 0.0, 1.0)
    return observe_many(alpha, beta, rng, evidence_cap=evidence_cap) * relevance


def fill_situational(candidates: Sequence[ContextCandidate], scores: Sequence[float], budget: int, *,
                     header: str, full_text_ratio: float = 0.5, compressed_max_chars: int = 200,
                     min_score: float = 0.0) -> Situational:
    """Fill `budget` tokens (header included): recall's best (`recalled`) first in the order
    given, then the rest top-down by score; see the module docstring."""
    if len(candidates) != len(scores):
        raise ValueError(f"{len(candidates)} candidates but {len(scores)} scores")
    kept = [i for i, c in enumerate(candidates) if c.recalled]
    order = kept + sorted((i for i, c in enumerate(candidates) if not c.recalled),
                          key=lambda i: (-float(scores[i]), candidates[i].id))
    best = max((float(s) for s in scores), default=0.0)
    remaining = budget - line_tokens(header)
    placed: list[Placed] = []
    no_room: list[int] = []
    below: list[int] = []
    for i in order:
        cand, score = candidates[i], float(scores[i])
        if score < min_score and not cand.recalled:
            below.append(cand.id)
            continue
        full = render_line(cand.memory_type, cand.content, cand.speaker, cand.when, cand.until)
        full_tokens = line_tokens(full)
        if (cand.recalled or score >= full_text_ratio * best) and full_tokens + 1 <= remaining:
            # the full text is wanted and fits: the compressed form is never looked at
            # (it was rendered and counted for every candidate, a new line each to count)
            placed.append(Placed(cand.id, "situational", "full", score, full, full_tokens))
            remaining -= full_tokens + 1
            continue
        short = render_line(cand.memory_type, compressed_form(cand, compressed_max_chars), cand.speaker, cand.when, cand.until)
        short_tokens = line_tokens(short)
        options: list[tuple[Form, str, int]] = []
        if cand.recalled or score >= full_text_ratio * best or full_tokens <= short_tokens:
            options.append(("full", full, full_tokens))
        if short_tokens < full_tokens:
            options.append(("compressed", short, short_tokens))
        for form, text, tokens in options:
            if tokens + 1 <= remaining:
                placed.append(Placed(cand.id, "situational", form, score, text, tokens))
                remaining -= tokens + 1
                break
        else:
            no_room.append(cand.id)
    return Situational(placed, no_room, below)


def roll_identity(candidates: Sequence[ContextCandidate], rng: np.random.Generator, *, threshold: float,
                  cap_tokens: int, reserved_tokens: int = 0, evidence_cap: float | None = None) -> IdentityRoll:
    """Observe each candidate once; inject the full text of those above `threshold`.

    `reserved_tokens` (header and session-stats line, as `section_tokens` counts
    them) count against `cap_tokens`.
    Over the cap, whole memories leave lowest observed first; never truncated.
    """
    if not candidates:
        return IdentityRoll([], {}, [])
    alpha = np.array([c.alpha for c in candidates], dtype=float)
    beta = np.array([c.beta for c in candidates], dtype=float)
    draws = observe_many(alpha, beta, rng, evidence_cap=evidence_cap)   # broadened by Phase C's entropy alarm
    observed = {c.id: float(d) for c, d in zip(candidates, draws, strict=True)}
    rolled = sorted((c for c in candidates if observed[c.id] > threshold),
                    key=lambda c: (-observed[c.id], c.id))
    placed = []
    for c in rolled:
        text = render_line(c.memory_type, c.content, c.speaker, c.when, c.until)
        placed.append(Placed(c.id, "identity", "full", observed[c.id], text, line_tokens(text)))
    dropped: list[int] = []
    while placed and reserved_tokens + sum(p.tokens + 1 for p in placed) > cap_tokens:
        dropped.append(placed.pop().id)
    return IdentityRoll(placed, observed, dropped)


def render_section(header: str, placed: Sequence[Placed], extra: Sequence[str] = ()) -> str:
    """Header, then the `extra` lines (e.g. session stats), then one line per memory."""
    lines = [*extra, *(p.text for p in placed)]
    return "\n".join([header, *lines]) if lines else ""


def session_stats_line(stats: SessionStats, now: datetime) -> str:
    """Plan §4.9 in one line: age, restarts, lifetime uptime including this session."""
    session_h = 0.0
    if stats.last_started_at is not None:
        session_h = max(0.0, (now - stats.last_started_at).total_seconds() / 3600.0)
    restarts = stats.times_restarted
    return (f"Continuity: {stats.age_days:.1f} days old, restarted {restarts} "
            f"time{'' if restarts == 1 else 's'}, {stats.uptime_total_hours + session_h:.1f} "
            f"hours awake in total (this session {session_h:.1f} h).")


def _unit(vec: np.ndarray, name: str) -> np.ndarray:
    # a focus needs a direction to blend with: a zero vector here is a caller's bug
    if not has_direction(vec):
        raise ValueError(f"{name} attention vector must be finite and non-zero")
    return unit(vec)


def blend_attention(current: np.ndarray, previous: np.ndarray | None, *, big_shift: float = 0.7,
                    inertia_after_big_shift: float = 0.05, inertia: float = 0.3) -> InertiaState:
    """Context inertia of plan §3.2; see the module docstring for the rule."""
    cur = _unit(current, "current")
    if previous is None:
        return InertiaState(cur.astype(np.float32), None, 0.0)
    prev = _unit(previous, "previous")
    if prev.shape != cur.shape:
        raise ValueError(f"attention vectors differ in shape: {cur.shape} vs {prev.shape}")
    shift = 1.0 - float(np.clip(cur @ prev, -1.0, 1.0))
    weight = inertia_after_big_shift if shift > big_shift else inertia
    blended = (1.0 - weight) * cur + weight * prev
    vector = unit(blended) if has_direction(blended) else cur
    return InertiaState(vector.astype(np.float32), shift, weight)
