"""Conversation context (issue 35; plan §4.6's aim, extractive, without a model).

In a conversation the turn that holds an answer often shares no word with the question
someone later asks about it: the words are in the turn *before* it ("What did you do last
weekend?" / "Went hiking with Mel."; the mind asks "What do you do for a living?", the user
answers "I'm a paramedic"). So every memory that comes from a conversation carries the
turns before it, with who said them, in `memories.conversation_context` (sql/150): the
full-text arm finds the memory by them at a lower weight than by its own words
(src/recall/search.py, `w_context`). The vector stays the turn's own (measured, notes.md).
The context is for finding only: what the user and the model read is the turn itself.

Where it comes from:
- imports (src/memory/importer.py): the lines before it in the file with the same
  `conversation` id (a session of a chat); a file without ids is one stream, cut into
  conversations where `event_time` jumps by more than SESSION_GAP;
- live (src/gates/record.py): the user's line carries the mind's reply before it (the
  question it answers), the mind's reply the user's line it answers (src/gates/scratch.py
  reads them from the scratch buffer).

With a model, §4.6's preamble (`content_contextualized`) is indexed beside this context,
never instead of it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from src.recall.bulk_import import ImportRecord
from src.recall.speakers import from_label, speaker_of
from src.text import excerpt

#: Turns before a memory that make its context. Tuned on the tune half of the real
#: conversations (bench/bench_realconv.py --context, notes.md): 1 and 2 tie, 3+ lose.
CONTEXT_TURNS = 2
#: Characters kept of each context turn: a turn that pasted a page must not make every
#: word of the page find the next line.
TURN_CHARS = 400
#: A file without conversation ids: a gap this long between two lines starts a new
#: conversation (a chat's sessions are hours or days apart; its turns minutes).
SESSION_GAP = timedelta(hours=3)


@dataclass(frozen=True)
class SaidTurn:
    """One turn as context: who said it (a name or a speaker kind, or None) and its words."""

    speaker: str | None
    text: str

    def line(self) -> str:
        text = excerpt(self.text, TURN_CHARS)
        if not self.speaker or text.lower().startswith(self.speaker.lower() + ":"):
            return text
        return f"{self.speaker}: {text}"


def context_text(turns: Sequence[SaidTurn], speaker: str | None = None) -> str | None:
    """The context column's text for these turns (oldest first); None when there are none.
    `speaker`: who said the memory itself, when a person's name (a question names who it
    asks about, and an imported turn's words do not hold its speaker's name; without it the
    turn *after* an answer, whose context holds "Jo: …", matched "What did Jo …" and the
    answer did not)."""
    lines = [t.line() for t in turns if t.text.strip()]
    if lines and speaker and (who := from_label(speaker)) is not None and who.kind == "person":
        lines.append(f"({speaker})")
    return "\n".join(lines) or None


@dataclass
class Threads:
    """The last `turns` turns of each conversation, in the order they were said: each new
    turn gets the context of the ones before it (`follow`)."""

    turns: int = CONTEXT_TURNS
    gap: timedelta = SESSION_GAP
    _recent: dict[str, deque[SaidTurn]] = field(default_factory=dict)
    _stream_at: datetime | None = None
    _stream: int = 0

    def follow(self, turn: SaidTurn, conversation: str | None = None, when: datetime | None = None) -> str | None:
        """The context of `turn` (None: first of its conversation, or `turns` is 0), then
        `turn` becomes context for the next ones. Without `conversation` the turn is in the
        file's one stream, where a gap over `gap` since the stream's last timed turn
        starts a new conversation."""
        if conversation is None:
            if when is not None:
                if self._stream_at is not None and abs(when - self._stream_at) > self.gap:
                    self._stream += 1
                self._stream_at = when
            key = f"\x00stream {self._stream}"
        else:
            key = conversation
        recent = self._recent.setdefault(key, deque(maxlen=max(self.turns, 1)))
        context = context_text(list(recent), turn.speaker) if self.turns > 0 else None
        recent.append(turn)
        return context


def follow_record(threads: Threads, record: ImportRecord) -> ImportRecord:
    """An import line with the turns before it in its conversation as its context
    (`threads` then holds it as context for the next lines). An export line (one with an
    `id`) keeps the context it carries, none included: it is restored, not recomputed."""
    m = record.memory
    speaker = speaker_of(m.source_tag, m.metadata)
    context = threads.follow(SaidTurn(speaker.label if speaker else None, str(m.content)), record.conversation,
                             m.event_time)
    if record.ref is not None or m.context is not None or context is None:
        return record
    return replace(record, memory=replace(m, context=context))
