"""Track 1's field (plan §3.2): what competes for the situational track of one cycle's
context, and what was just said beside it. The competition itself is src/context/tracks.py;
src/context/assembly.py reads the rows and fills the sections.

- `situational_candidates`: recall's memories and near misses, dated, each with its speaker;
  recall's best `first` marked to lead the track (`ContextCandidate.recalled`).
- `working_lines`: what was just said and matches (src/recall/working.py), marked as not yet
  consolidated, within half the track.
- `others_left_out`: other people's words for the user's question about themselves. Asked
  "Which tea do I like best?", a small model answered "You like mint tea." from "Emi said: I
  love mint tea…", an imported stranger's line, with the user's own "My favourite tea is
  lapsang souchong." first in the same context (the local model's runs G, H and J of
  bench/local_model_script.py; also "Spanish", "Max, a golden retriever"). So when the user
  asks about themselves in the first person (`users_question`) and the context holds a line
  of the user's own (recalled or just said), the lines of other people (imported speakers,
  `Speaker.kind` "person") stay out of Track 1, but those of a person the question names
  ("What did Emi say about my tea?"). Without a line of the user's they stay: they may be
  all there is.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from datetime import datetime

from src.context import tracks
from src.recall.retrieval import Recalled, Retrieval
from src.recall.speakers import USER, speaker_of
from src.recall.when import memory_time, said_when, the_date
from src.recall.working import NOT_CONSOLIDATED
from src.text import excerpt

#: Characters of one working-memory line (what was just said is usually short).
WORKING_LINE_CHARS = 600
_WORD = re.compile(r"[^\W_]+")


def others_left_out(candidates: Sequence[tracks.ContextCandidate], retrieval: Retrieval | None,
                    users_question: str) -> list[tracks.ContextCandidate]:
    """`candidates` without other people's lines, for the user's question about themselves when
    a line of the user's own is in view (module docstring); as they are otherwise."""
    if not users_question or retrieval is None:
        return list(candidates)
    users = any(c.speaker == USER for c in candidates) or any(w.speaker == USER for w in retrieval.working)
    if not users:
        return list(candidates)
    asked = set(_WORD.findall(users_question.lower()))
    return [c for c in candidates if c.speaker is None or c.speaker.kind != "person"
            or set(_WORD.findall((c.speaker.name or "").lower())) & asked]   # "Emi" of "Emi Tanaka"


def situational_candidates(retrieval: Retrieval | None, exclude: Collection[int] = (),
                           now: datetime | None = None, first: int = 0) -> list[tracks.ContextCandidate]:
    """Track 1's field: the retrieval's memories and near-misses, minus `exclude`, deduped;
    each dated relative to `now` (none without it). Recall's best `first` are `recalled`:
    placed first, in recall's order."""
    if retrieval is None:
        return []
    seen = set(exclude)
    kept = set(retrieval.ids[:first])
    out = []
    recalled: Sequence[Recalled] = [*retrieval.memories, *retrieval.near_misses]
    for r in recalled:
        if r.id in seen or r.hit.immutable:
            continue
        seen.add(r.id)
        h = r.hit
        when = said_when(memory_time(h.event_time, h.created_at), now) if now is not None else ""
        until = the_date(h.superseded_at) if h.superseded_at is not None else ""
        out.append(tracks.ContextCandidate(h.id, h.content, h.memory_type, h.alpha, h.beta,
                                           h.compressed, r.relevance, h.immutable,
                                           speaker_of(h.source_tag, h.metadata), when, until, r.id in kept))
    return out


def working_lines(retrieval: Retrieval | None, budget: int, now: datetime | None = None) -> list[str]:
    """Working-memory hits as context lines, marked as not yet consolidated, within `budget`
    (dated relative to `now`)."""
    lines: list[str] = []
    for w in retrieval.working if retrieval is not None else []:
        when = said_when(w.created_at, now) if now is not None else ""
        line = tracks.render_line(NOT_CONSOLIDATED, excerpt(w.content, WORKING_LINE_CHARS), w.speaker, when)
        if tracks.section_tokens("", [*lines, line]) > budget // 2:
            break
        lines.append(line)
    return lines
