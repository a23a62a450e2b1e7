"""Text for the operator's terminal: control characters and bidi overrides shown, not obeyed.

A stored memory or a model reply may contain `ESC ] 0 ; title BEL` (retitles the
window), `ESC [ 2 J` (clears the screen) or U+202E (reverses what follows). Anything
printed — replies, memories, command output, log lines — goes through `escape`,
which writes such characters as visible escapes (`\\x1b`, `\\u202e`). Newlines and
tabs are layout and stay; a backslash is not doubled, so ordinary text reads as
typed. Stored content is never changed: this is only for display.
"""

from __future__ import annotations

import re

# C0 except \t and \n, DEL, C1; bidi embeddings/overrides/isolates, LRM/RLM/ALM; the
# line and paragraph separators (a terminal may treat them as line breaks).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _show(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape(text: str) -> str:
    """`text` with every unsafe character written as a visible escape."""
    return _UNSAFE.sub(_show, text)
