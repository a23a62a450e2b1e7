"""What a forgotten text becomes wherever it was logged: its size, never its words.

The memory-mode-off placeholder (src/gates/modes.py `unkept_text`) says a text was never
kept; this one says a kept text was erased. sql/156's `forgotten_placeholder` writes the
same words inside the database.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

FORGOTTEN = "[forgotten: {words} word{s}]"
#: A needle shorter than this would scrub unrelated rows ("a", "is"): the text itself is
#: still matched whole, only its parts below this size are not searched on their own.
MIN_NEEDLE_CHARS = 3
#: A log keeps a memory's text cut to a preview (gate decisions, thought_log candidates,
#: consolidation evidence) or quotes one of its sentences: a memory is searched for by its
#: first PREFIX_CHARS characters and by each clause of at least CLAUSE_CHARS too.
PREFIX_CHARS = 40
CLAUSE_CHARS = 16
#: ... and by each token that holds a digit (a code, a PIN, a password, a phone number):
#: the guardian's own `/forget 7419` or a reply quoting only the number holds no clause of
#: it. At least TOKEN_CHARS characters once its end punctuation is cut.
TOKEN_CHARS = 3
_TOKEN = re.compile(r"\S*\d\S*")
_CLAUSE = re.compile(r"(?<=[.!?;:,])\s+|\n+")


def forgotten_text(text: str) -> str:
    """The placeholder of `text`: "[forgotten: 12 words]"."""
    words = len(text.split())
    return FORGOTTEN.format(words=words, s="" if words == 1 else "s")


def parts(text: str) -> list[str]:
    """A memory's text and the pieces of it a log may hold alone: its first PREFIX_CHARS
    characters, each clause of at least CLAUSE_CHARS (without its end punctuation), and
    each token with a digit of at least TOKEN_CHARS."""
    text = " ".join(text.split())
    pieces = [text, text[:PREFIX_CHARS]]
    pieces += [c.strip().rstrip(".,;:!?") for c in _CLAUSE.split(text)]
    tokens = [t.strip(".,;:!?()[]{}\"'“”‘’") for t in _TOKEN.findall(text)]
    return ([p for p in dict.fromkeys(pieces) if len(p) >= CLAUSE_CHARS or p == text]
            + [t for t in dict.fromkeys(tokens) if len(t) >= TOKEN_CHARS])


def needles(texts: Iterable[str]) -> list[str]:
    """The strings whose presence marks a row as holding forgotten words: each text whole,
    and as it is written inside a JSON value (quotes and line breaks escaped), so that a
    search of a row's text form finds it in a JSON column too. Lower-cased, deduplicated,
    longest first; blank and too-short texts are left out."""
    out: set[str] = set()
    for text in texts:
        for form in {text.strip(), " ".join(text.split())}:
            out.add(form.lower())
            out.add(json.dumps(form, ensure_ascii=False)[1:-1].lower())
    return sorted((n for n in out if len(n) >= MIN_NEEDLE_CHARS), key=lambda n: (-len(n), n))


def holds(text: str | None, found: Iterable[str]) -> bool:
    """Whether `text` contains one of the needles (case-insensitive)."""
    if not text:
        return False
    low = text.lower()
    return any(n in low for n in found)
