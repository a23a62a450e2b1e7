"""The JSONL line format of `import` and `export`.

Import reads `{"content", "memory_type", "event_time", "source_tag", "metadata"}`;
only `content` is required. An export line adds what restores the memory as it
was: `id` (its id in the exporting store; supersedes links refer to it), `alpha`,
`beta`, `immutable`, `source_confidence`, `compressed`, `created_at`,
`access_count`, `last_accessed`, `access_timestamps`, `utility_score`,
`supersedes` (ids of the memories it consolidated) and, for reading only,
`embed_model`. Times are ISO 8601; a time without a zone is taken as UTC.

`parse_line` returns an ImportRecord or raises LineError with the reason; the
caller adds the line number.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

from src.providers.embedding import MEMORY_TYPE_PREFIXES
from src.recall.bulk_import import ImportRecord
from src.recall.store import NewMemory

IMPORT_FIELDS = ("content", "memory_type", "event_time", "source_tag", "metadata")
EXPORT_FIELDS = ("id", "alpha", "beta", "immutable", "source_confidence", "compressed", "created_at",
                 "access_count", "last_accessed", "access_timestamps", "utility_score", "supersedes",
                 "embed_model")
KNOWN_FIELDS = frozenset(IMPORT_FIELDS + EXPORT_FIELDS)
#: Source tag of imported lines that name none.
DEFAULT_SOURCE_TAG = "import"


class LineError(ValueError):
    """Why one line cannot be imported (one sentence, no line number)."""


def _time(value: Any, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise LineError(f"'{name}' must be an ISO 8601 string, got {type(value).__name__}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise LineError(f"'{name}' is not an ISO 8601 time: {value[:40]!r}") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _number(data: dict, name: str, default: float, *, positive: bool = False,
            unit: bool = False) -> float:
    value = data.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise LineError(f"'{name}' must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise LineError(f"'{name}' must be > 0, got {value!r}")
    if unit and not 0 <= value <= 1:
        raise LineError(f"'{name}' must be in [0, 1], got {value!r}")
    return float(value)


def _int(data: dict, name: str) -> int | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise LineError(f"'{name}' must be a whole number >= 0, got {value!r}")
    return value


def _text(data: dict, name: str, default: str | None) -> str | None:
    value = data.get(name, default)
    if value is not None and not isinstance(value, str):
        raise LineError(f"'{name}' must be a string, got {type(value).__name__}")
    return value


def parse_line(text: str, line: int) -> ImportRecord | None:
    """One line → an ImportRecord; None for a blank line; LineError says what is wrong."""
    if not text.strip():
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LineError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise LineError(f"expected a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - KNOWN_FIELDS)
    if unknown:
        raise LineError(f"unknown field(s) {', '.join(map(repr, unknown))}; "
                        f"known: {', '.join(IMPORT_FIELDS)} (and the export fields)")
    content = data.get("content")
    if not isinstance(content, str) or not content.strip():
        raise LineError("'content' is missing or empty" if not isinstance(content, str) or not content
                        else "'content' is only whitespace")
    memory_type = _text(data, "memory_type", "episodic")
    if memory_type not in MEMORY_TYPE_PREFIXES:
        raise LineError(f"unknown memory_type {memory_type!r}; expected one of: "
                        f"{', '.join(MEMORY_TYPE_PREFIXES)}")
    metadata = data.get("metadata", {})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise LineError(f"'metadata' must be a JSON object, got {type(metadata).__name__}")
    source_tag = _text(data, "source_tag", DEFAULT_SOURCE_TAG) or DEFAULT_SOURCE_TAG
    immutable = data.get("immutable", False)
    if not isinstance(immutable, bool):
        raise LineError(f"'immutable' must be true or false, got {immutable!r}")
    stamps = data.get("access_timestamps", [])
    if not isinstance(stamps, list):
        raise LineError("'access_timestamps' must be a list of ISO 8601 times")
    supersedes = data.get("supersedes", [])
    if not isinstance(supersedes, list) or not all(
            isinstance(s, int) and not isinstance(s, bool) for s in supersedes):
        raise LineError("'supersedes' must be a list of memory ids")
    memory = NewMemory(
        content=content, memory_type=memory_type, source_tag=source_tag,
        source_confidence=_number(data, "source_confidence", 1.0, unit=True),
        event_time=_time(data.get("event_time"), "event_time"),
        compressed=_text(data, "compressed", None), immutable=immutable,
        alpha=_number(data, "alpha", 1.0, positive=True), beta=_number(data, "beta", 4.0, positive=True),
        metadata=metadata,
    )
    return ImportRecord(
        memory=memory, line=line, created_at=_time(data.get("created_at"), "created_at"),
        access_count=_int(data, "access_count") or 0,
        last_accessed=_time(data.get("last_accessed"), "last_accessed"),
        access_timestamps=tuple(_time(s, "access_timestamps") for s in stamps),
        utility_score=_number(data, "utility_score", 0.0), ref=_int(data, "id"),
        supersedes=tuple(supersedes),
    )
