"""Skill labels: snake_case slugs, collision-free names, typo-tolerant lookup. Pure."""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable

MAX_LABEL_CHARS = 64
_NOT_WORD = re.compile(r"[^a-z0-9]+")
LABEL_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def slugify(text: str, *, fallback: str = "skill") -> str:
    """`text` as a snake_case label: ASCII letters/digits joined by '_', starting with a letter."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = _NOT_WORD.sub("_", ascii_text.lower()).strip("_")
    if not slug or not slug[0].isalpha():
        slug = f"{fallback}_{slug}".strip("_") if slug else fallback
    return slug[:MAX_LABEL_CHARS].rstrip("_")


def make_unique_label(base: str, taken: Iterable[str]) -> str:
    """`base`, or `base_2`, `base_3`, … — the first that is not `taken`."""
    taken = set(taken)
    if base not in taken:
        return base
    n = 2
    while True:
        suffix = f"_{n}"
        candidate = base[: MAX_LABEL_CHARS - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        n += 1


def closest_label(wanted: str, labels: Iterable[str], *, cutoff: float) -> str | None:
    """The existing label nearest to `wanted` (difflib ratio ≥ cutoff), or None.

    The input is slugified first, so "CSV summary" finds `csv_summary` exactly.
    """
    labels = list(labels)
    slug = slugify(wanted)
    if slug in labels:
        return slug
    found = difflib.get_close_matches(slug, labels, n=1, cutoff=cutoff)
    return found[0] if found else None
