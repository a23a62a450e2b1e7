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


def _age(c: Candidate) -> tuple:
    return c.enqueued_at, c.id or 0


def take_turn(winner: Candidate, queue: AttentionQueue, max_messages: int) -> Turn:
    """When a user message wins: the oldest `max_messages` waiting user messages of its
    channel, the winner among them or put back when newer ones wait. Salience decides that
    the user is heard now; which of the user's messages is heard is their order (a client's
    second message answered before its first, with more than `max_messages` waiting, seen
    under twenty API clients). One channel a turn: its one reply goes back to where its
    messages came from (a terminal line answered together with an API message gave the API
    client a reply to a line it never sent). Non-user winners are taken alone."""
    if winner.source != "user":
        return Turn(winner, (winner,))
    waiting = sorted((winner, *queue.take("user", max_messages, channel=winner.channel)), key=_age)
    parts, later = tuple(waiting[:max_messages]), waiting[max_messages:]
    for c in later:                       # newer than the turn: they wait, the winner too
        queue.push(c)
    if len(parts) == 1:
        return Turn(parts[0], parts)
    if winner.id not in {p.id for p in parts}:    # the oldest stands for the turn in the winner's place
        winner = parts[0]
    # the winner's embedding stands for the turn: it is what won attention; one off-mode
    # message makes the whole turn's text a placeholder in the logs (its text holds them all)
    return Turn(replace(winner, text=combined_text(parts), unkept=any(p.unkept for p in parts)), parts)
