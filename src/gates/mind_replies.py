"""The mind's reply gives way to the user's own words at the exit gate (issue 38 item 3).

Run with a 1.5B model, the mind's replies became memories that outranked what the user said:
"Remind me, what do I do for a living? I do not have a job." was stored as "I said: …" and then
ranked first for the job question; a wrong reply that contradicted the user's statement was
a "contradicting" item, and the gate's persist_flag weakened the user's statement in its
favour. So a reply of the mind's (`internal_self`) is dropped when

- the user's own statement contradicts it (the contradiction found is with one of the user's
  lines, stored or of the same chunk): the user's words stand, untouched; or
- it only restates one of the user's lines: at least `RESTATES` of its content words (and
  `MIN_WORDS`) are in that line ("Your sister Maren lives in Gdansk." after "My sister Maren
  lives in Gdansk."): the user's statement already holds it, and a copy in the mind's voice
  would compete with it in recall.

- it only says that the mind does not know, or takes nothing up (every sentence; a question
  aside): run G of the local model's script stored "I'm sorry, but I don't know any
  information about your dog." — first by full text and by vector for the next question about
  the dog, which teaches the model to not know again, while the user's "My dog is a
  three-legged greyhound called Pepper." ranked below it. An absence is no memory: the user's
  next statement ends it.

What the mind adds in its own words (a question with something in it, an opinion, a fact
the user did not state) is judged as before.
"""

from __future__ import annotations

from dataclasses import replace

from src.gates.declining import only_not_knowing
from src.gates.evaluation import Evaluation, Neighbour
from src.gates.matrix import CellDecision
from src.gates.scratch import BufferedItem
from src.gates.utterance import content_words
from src.recall.speakers import SAID_TAG, USER, speaker_of

#: The share of a reply's content words a line of the user's must hold for the reply to restate it.
RESTATES = 0.8
MIN_WORDS = 2


def _restates(reply: set[str], line: Neighbour) -> bool:
    shared = reply & content_words(line.content)
    return len(shared) >= MIN_WORDS and len(shared) >= RESTATES * len(reply)


def yields_to_user(e: Evaluation) -> str | None:
    """Why the mind's reply judged in `e` is dropped for the user's words; None when it is not."""
    if e.novelty == "contradicting" and e.decided_by is not None and e.decided_by[0].users:
        return "the user's own statement contradicts this reply of the mind's: the user's words stand"
    if only_not_knowing(e.item.content):
        return "it only says the mind does not know: an absence, which the user's next statement ends"
    reply = content_words(e.item.content)
    near = [n for n in [e.nearest, *(n for n, _ in e.verdicts)] if n is not None and n.users]
    if reply and any(_restates(reply, n) for n in near):
        return "it restates the user's own statement, which holds it already"
    return None


def give_way(e: Evaluation) -> CellDecision | None:
    """`e`'s cell, dropped when it is the mind's reply and `yields_to_user` says why."""
    if e.cell is None or e.item.source_tag != SAID_TAG or e.cell.action == "drop":
        return e.cell
    why = yields_to_user(e)
    return e.cell if why is None else replace(e.cell, action="drop", reason=f"{e.cell.reason}; {why} -> drop")


def said_by_user(item: BufferedItem) -> bool:
    """Whether a buffered item is the user's own line (src/recall/speakers.py)."""
    return speaker_of(item.source_tag, item.metadata) == USER


__all__ = ["MIN_WORDS", "RESTATES", "give_way", "said_by_user", "yields_to_user"]
