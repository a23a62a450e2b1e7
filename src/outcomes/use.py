"""Which memories an answer drew on (plan §5.3; issue 25: usefulness from outside recall).

Recall records its own accesses, so "accessed again" made whatever was recalled often look
useful. The evidence here comes from the answer instead. The measure, per memory that was
in the answer's context (the `use.tracks` sections: situational and identity; the
immutable boundaries are in every context and are not measured):

    own     = content words of the memory's line as the model saw it, less the speaker
              label and less every content word of the question (the focus): words the
              answer could only have taken from the memory
    shared  = own ∩ content words of the answer          (plural -s folded on both sides)
    reflected  when |shared| >= min(`use.min_words`, |own|)
               and |shared| / |own| >= `use.min_share`
    restated   (the user's message only, when not reflected) when the message holds at least
               `use.restate_share` of the memory's words, and min(`use.min_words`, all) of
               them: the user said it again — the exit gate's "confirming" (src/gates),
               seen here in the cycle of the recall. Its own words are then few or none, so
               the answer could not be seen drawing on it.

Content words are the exit gate's (src/gates/utterance.py: function words and reactions
out, numbers in). Subtracting the focus keeps an answer that only repeats the question
("How old is my cat?" — "I don't know how old your cat is") from counting, and a DMN
self-prompt that quotes a memory from crediting it for being quoted back. Citation by id
is not available: the context shows memories without ids. A reflex reply (no model) lists
recall verbatim and an off-mode turn leaves no trace (src/gates/modes.py): neither is measured.

`after_answer` runs in the loop's aftermath: it writes one `reflected` (or `restated`) row
per memory the answer drew on (or the user said again), and when the user's message is plain feedback on the answer before
(src/outcomes/tracking.explicit_feedback: "thanks", "that's wrong") a `confirmed` or
`corrected` row for each memory that earlier answer drew on.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from src.db.sql import Executor
from src.gates.utterance import content_words
from src.outcomes import uses_repository as repo
from src.outcomes.settings import UseSettings
from src.outcomes.tracking import explicit_feedback

#: Words of the speaker label a context line carries ("The user said: …", src/recall/speakers.py).
ATTRIBUTION = frozenset({"user"})
_LINE_PREFIX = re.compile(r"^\s*-\s*\[[^\]]*\]\s*")      # "- [episodic] " (src/context/tracks.render_line)


class _Placed(Protocol):
    id: int
    track: str
    text: str


class _Winner(Protocol):
    text: str
    source: str
    unkept: bool


class _Record(Protocol):
    cycle: int
    output: str | None
    winner: _Winner


@functools.lru_cache(maxsize=4096)
def words(text: str) -> frozenset[str]:
    """Content words with a plural -s folded ("cats" = "cat"; "glass" stays). Remembered:
    the identity lines and recurring memories are measured again every cycle."""
    return frozenset(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
                     for w in content_words(text))


@dataclass(frozen=True)
class Reflection:
    memory_id: int
    track: str
    share: float                 # reflected: |shared| / |own| (0 with no own word); restated: said / all
    shared: tuple[str, ...]      # the words it rests on
    kind: str | None             # "reflected", "restated" or None (not used)

    @property
    def reflected(self) -> bool:
        return self.kind == "reflected"


def _enough(part: frozenset[str], whole: frozenset[str], share: float, cfg: UseSettings) -> bool:
    return bool(whole) and len(part) >= min(cfg.min_words, len(whole)) and len(part) / len(whole) >= share


def reflection(memory_id: int, track: str, line: str, focus: frozenset[str], answer: frozenset[str],
               cfg: UseSettings, *, from_user: bool = False) -> Reflection:
    """The measure of the module docstring for one context line."""
    mine = words(_LINE_PREFIX.sub("", line)) - ATTRIBUTION
    own = mine - focus
    shared = own & answer
    share = len(shared) / len(own) if own else 0.0
    if _enough(shared, own, cfg.min_share, cfg):
        return Reflection(memory_id, track, round(share, 4), tuple(sorted(shared)), "reflected")
    said = mine & focus
    if from_user and _enough(said, mine, cfg.restate_share, cfg):
        return Reflection(memory_id, track, round(len(said) / len(mine), 4), tuple(sorted(said)), "restated")
    return Reflection(memory_id, track, round(share, 4), tuple(sorted(shared)), None)


def reflections(entries: Iterable[_Placed], focus: str, answer: str, cfg: UseSettings, *,
                from_user: bool = False) -> list[Reflection]:
    """Each measured context entry, once per memory (its first line)."""
    focus_words, answer_words = words(focus), words(answer)
    seen: set[int] = set()
    out = []
    for p in entries:
        if p.track in cfg.tracks and p.id not in seen:
            seen.add(p.id)
            out.append(reflection(p.id, p.track, p.text, focus_words, answer_words, cfg, from_user=from_user))
    return out


def context_entries(assembled: object) -> list[_Placed]:
    """The placed memories of an assembled context; none for a degraded one (no sections)."""
    return [p for section in getattr(assembled, "sections", ()) for p in section.entries]


async def after_answer(db: Executor, cfg: UseSettings, session_id: str | None, record: _Record,
                       assembled: object, *, modelled: bool, now: datetime) -> list[int]:
    """The aftermath's evidence of use (module docstring); returns the ids the answer drew on."""
    winner = record.winner
    if winner.unkept or not modelled or not record.output:
        return []
    if winner.source == "user":
        await _feedback_on_last_answer(db, winner.text, session_id, record.cycle, now)
    found = [r for r in reflections(context_entries(assembled), winner.text, record.output, cfg,
                                    from_user=winner.source == "user") if r.kind is not None]
    await repo.insert_uses(db, [repo.Use(r.memory_id, r.kind, 0.0, r.share,
                                         {"track": r.track, "words": list(r.shared)}) for r in found],
                           at=now, session_id=session_id, cycle=record.cycle)
    return [r.memory_id for r in found if r.reflected]


async def _feedback_on_last_answer(db: Executor, text: str, session_id: str | None, cycle: int,
                                   now: datetime) -> None:
    """A user's plain feedback confirms or corrects the memories the answer before drew on."""
    valence = explicit_feedback(text)
    if valence is None:
        return
    answer = await repo.last_answer(db, not_cycle=(session_id, cycle))
    if answer is None:
        return
    ids = await repo.reflected_in(db, answer.session_id, answer.cycle)
    kind = "confirmed" if valence > 0 else "corrected"
    await repo.insert_uses(db, uses_for(ids, kind, valence, {"answer_cycle": answer.cycle,
                                                             "answer_session": answer.session_id}),
                           at=now, session_id=session_id, cycle=cycle)


def uses_for(memory_ids: Sequence[int], kind: str, valence: float, evidence: dict) -> list[repo.Use]:
    return [repo.Use(i, kind, valence, None, evidence) for i in memory_ids]
