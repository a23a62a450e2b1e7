"""Turning raw bytes from the outside into text PostgreSQL will accept.

PostgreSQL `text` rejects NUL (\\x00) and invalid UTF-8; a lone surrogate from a
decoder would fail to encode later. Cleaning happens once, at the edge, and
reports what it changed so the user is told instead of silently corrected.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CleanText:
    text: str
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.text.strip()


def clean_text(raw: bytes | str) -> CleanText:
    """Decode (replacing invalid UTF-8), drop NULs and lone surrogates, NFC-normalise."""
    notes: list[str] = []
    if isinstance(raw, bytes):
        text = raw.decode("utf-8", errors="replace")
        if "\ufffd" in text and b"\xef\xbf\xbd" not in raw:
            notes.append("invalid UTF-8 bytes were replaced with U+FFFD")
    else:
        text = raw
    text = storable(text, notes)
    text = unicodedata.normalize("NFC", text)
    return CleanText(text.rstrip("\r\n"), notes)


def storable(text: str, notes: list[str] | None = None) -> str:
    """`text` without what PostgreSQL `text` and `jsonb` refuse: NUL bytes are removed, lone
    surrogates replaced with "?". Nothing else changes; `notes` collects what did."""
    if "\x00" in text:
        text = text.replace("\x00", "")
        if notes is not None:
            notes.append("NUL bytes were removed")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", errors="replace").decode("utf-8")
        if notes is not None:
            notes.append("unpaired surrogates were replaced")
    return text


def cut(text: str, limit: int) -> str:
    """`text` at most `limit` characters; a cut drops the trailing space and ends with "…"
    inside the limit, so the reader sees that something was left out. Lines are kept."""
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit!r}")
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def excerpt(text: str, limit: int) -> str:
    """`text` on one line (whitespace runs collapsed to one space), `cut` to `limit`.

    The one helper for excerpts in prompts, reports and error lines. Control characters
    stay: text for the operator goes through src/terminal.escape (which shows them), text
    for a model through `without_controls`.
    """
    return cut(" ".join(text.split()), limit)


def without_controls(text: str) -> str:
    """`text` without control and format characters (escape sequences, bidi overrides):
    whitespace stays. For text a model reads, where a visible escape would be noise."""
    return "".join(ch for ch in text if ch.isprintable() or ch.isspace())


_SENTENCE_END = re.compile(r"[.!?…](?=\s|$)|\n")


def first_sentence(text: str, max_chars: int) -> str:
    """A one-line summary without a language model: the first sentence, at most `max_chars`.

    Whitespace runs become single spaces. A sentence longer than `max_chars` is cut at
    the last space before the limit (when that keeps at least half of it) and gets "…".
    The deterministic stand-in for `compressed` (exit gate, context assembly).
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars!r}")
    text = text.strip()
    end = _SENTENCE_END.search(text)
    sentence = " ".join((text[: end.end()] if end else text).split())
    if len(sentence) <= max_chars:
        return sentence
    head = sentence[: max_chars - 1]
    space = head.rfind(" ")
    if not sentence[max_chars - 1].isspace() and space >= (max_chars - 1) // 2:
        head = head[:space]                    # the limit fell inside a word: drop it
    return head.rstrip(" ,;:-") + "…"


def size(text: str) -> str:
    """What a log line says of a text instead of its words: "12 words, 64 characters"
    (issue 39: the log never holds what the user, or the mind, said)."""
    words, chars = len(text.split()), len(text)
    return f"{words} word{'' if words == 1 else 's'}, {chars} character{'' if chars == 1 else 's'}"
