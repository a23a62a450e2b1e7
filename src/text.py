"""Turning raw bytes from the outside into text PostgreSQL will accept.

PostgreSQL `text` rejects NUL (\\x00) and invalid UTF-8; a lone surrogate from a
decoder would fail to encode later. Cleaning happens once, at the edge, and
reports what it changed so the user is told instead of silently corrected.
"""

from __future__ import annotations

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


def excerpt(text: str, limit: int) -> str:
    """`text` on one line (whitespace runs collapsed to one space), at most `limit` characters.

    A cut drops the trailing space and ends with "…" inside the limit, so the reader
    sees that something was left out. The one helper for excerpts in prompts, reports
    and error lines.
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit!r}")
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"
