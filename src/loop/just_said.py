"""What the reflex reply shows when recall brings nothing back: what was just said.

Recall leaves out the rows of the turn it answers (they are the question), so in a turn
that took "my name is Dana" and "What is my name?" together, and before the scratch
flush has run, the reflex reply said "Nothing comes back from memory yet." with the
answer one line above the question (issue 41). Without a model the reply cannot answer;
it can show the lines that bear on the question. Those are the user's statements in the
turn itself and in the conversation window that share a content word with the question.
A question or chatter is never shown as what the user said ("what is my name?" is no
answer to "what is my name?"). Pure: the loop hands the lines in.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from src.consolidation.clustering import content_words
from src.gates.utterance import classify

Said = tuple[str, datetime | None]      # a line's words and when it was said (None: unknown)


def bearing_on(question: str, lines: Sequence[Said]) -> list[Said]:
    """The statements among `lines` that share a content word with `question`, each text
    once (whitespace collapsed), in the order given; `question` itself is left out."""
    asked = content_words(question)
    asked_text = " ".join(question.split())
    seen: set[str] = set()
    out: list[Said] = []
    for text, at in lines:
        flat = " ".join(text.split())
        if not flat or flat == asked_text or flat in seen:
            continue
        seen.add(flat)
        if content_words(flat) & asked and classify(flat).kind == "statement":
            out.append((flat, at))
    return out
