"""Escaping for the web view: everything shown passes through `esc`.

html.escape covers markup; control characters (C0, DEL, C1) and the bidirectional
controls that can reorder what the guardian reads are made visible as `\\xNN` /
`\\u202e` in a marked span instead of being passed to the browser.
"""

from __future__ import annotations

import html
import re

# C0 except tab/newline, DEL, C1, and the bidi overrides/isolates/marks.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u061c\ufeff]")


def visible(text: str) -> str:
    """Plain text with control and bidi characters written as escapes (for JSON and SVG)."""
    return _INVISIBLE.sub(_code, text)


def _code(match: re.Match[str]) -> str:
    cp = ord(match.group(0))
    return f"\\x{cp:02x}" if cp <= 0xFF else f"\\u{cp:04x}"


def esc(value: object) -> str:
    """HTML-safe text of any value; control characters shown as marked escapes."""
    if value is None:
        return ""
    text = html.escape(str(value), quote=True)
    return _INVISIBLE.sub(lambda m: f'<span class="ctl">{_code(m)}</span>', text)

