"""Several waiting user messages taken together as one turn (issue 11).

User input is never evicted from attention. When a user message wins a cycle while
more user messages wait, the mind takes them together: one cycle, one reply, and
the turn says so — the model sees the messages numbered under a framing line, the
reply starts with a line naming how many messages it answers (the first and the last,
quoted), and `thought_log.attention_focus` holds all their text.

A reply to one message says which when other lines were typed after it (issue 41: with
several lines typed before the first answer, a reply read as the answer to the line just
above it): `[re: "What is my name?"]` on a line of its own. Right after its own message
it says nothing more: the reference is only there when the order would mislead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from src.loop.attention_queue import AttentionQueue, Candidate
from src.text import excerpt

FRAME = "[{n} messages from the user, taken together as one turn]"
REPLY_FRAME = "(answering {n} messages together: {first} to {last})"
REFERENCE = "[re: {quoted}]"
#: How much of a message a reference quotes: enough to recognise the line typed.
QUOTE_CHARS = 40


@dataclass(frozen=True)
class Turn:
    """The cycle's input: the winner alone, or the winner with the user messages that waited."""

    candidate: Candidate            # what the cycle works on (text combined when several)
    parts: tuple[Candidate, ...]    # the original candidates, oldest first

    @property
    def combined(self) -> bool:
        return len(self.parts) > 1

    def frame_reply(self, answer: str, *, typed_after: bool = False) -> str:
        """The reply as delivered: a combined turn says how many messages it answers and
        quotes the first and last; a single message is quoted when `typed_after` (other
        lines came in after it, so the line above the reply is not the one it answers)."""
        if self.combined:
            head = REPLY_FRAME.format(n=len(self.parts), first=quote(self.parts[0].text),
                                      last=quote(self.parts[-1].text))
        elif typed_after:
            head = REFERENCE.format(quoted=quote(self.candidate.text))
        else:
            return answer
        return f"{head}\n{answer}"


def quote(text: str) -> str:
    """A message as a reply's reference names it: one line, cut, in double quotes."""
    return f'"{excerpt(text, QUOTE_CHARS)}"'


def combined_text(parts: tuple[Candidate, ...]) -> str:
    """The messages numbered in arrival order under one framing line."""
    return combined_texts([c.text for c in parts])


def combined_texts(texts: Sequence[str]) -> str:
    """`combined_text` of the messages' texts (a message cut to fit the model's window)."""
    lines = [FRAME.format(n=len(texts))]
    lines += [f"{i}. {t}" for i, t in enumerate(texts, 1)]
    return "\n".join(lines)


def take_turn(winner: Candidate, queue: AttentionQueue, max_messages: int) -> Turn:
    """The winner, plus (when it is a user message) up to `max_messages - 1` waiting user
    messages taken off the queue, oldest first. Non-user winners are taken alone."""
    if winner.source != "user" or max_messages <= 1:
        return Turn(winner, (winner,))
    others = queue.take("user", max_messages - 1)
    if not others:
        return Turn(winner, (winner,))
    parts = tuple(sorted((winner, *others), key=lambda c: (c.enqueued_at, c.id or 0)))
    # the winner's embedding stands for the turn: it is what won attention; one off-mode
    # message makes the whole turn's text a placeholder in the logs (its text holds them all)
    return Turn(replace(winner, text=combined_text(parts), unkept=any(p.unkept for p in parts)), parts)
