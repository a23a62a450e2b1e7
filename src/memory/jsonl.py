"""The JSONL line format of `import` and `export`.

Import reads `{"content", "memory_type", "event_time", "source_tag", "metadata",
"conversation", "turn"}`; only `content` is required. `conversation` names the
conversation (a chat's session) a line is a turn of and `turn` its place in it: the lines
before it in the same conversation become its context (src/recall/conversation.py;
without ids, the file is one stream cut where `event_time` jumps). Lines of a conversation
are read in file order, as an export writes them; a `turn` that does not rise within its
conversation is counted and said at the end (its context is still the lines before it). The
id is kept as `metadata.conversation` (unless the metadata names one already): the deep pass
joins no two imported conversations (src/consolidation/deep/evidence.py). An export line adds what restores the memory as it
was: `id` (its id in the exporting store; supersedes links refer to it), `alpha`,
`beta`, `immutable`, `protected`, `source_confidence`, `compressed`,
`content_contextualized`, `conversation_context` (kept as it was, not recomputed), `created_at`, `access_count`, `last_accessed`,
`access_timestamps`, `utility_score`, `supersedes` (the memories it consolidated,
each `{"id", "via"}`; a plain id, as older exports wrote, is via "insight") and,
for reading only, `embed_model`. Times are ISO 8601; a time without a zone is
taken as UTC.

What a line may hold is bounded, because one hostile or broken line must cost
that line only: UTF-8 (a bad byte is named, not silently replaced: the memory
would differ from its source), JSON nested at most MAX_JSON_DEPTH levels (deeper
nesting exhausted the parser's recursion and stopped the whole import), and
texts of at most `max_chars` characters (the `agent.max_input_chars` a typed
line is held to; a contextualised text may add MAX_CONTEXT_EXTRA to it).

`decode_line` and `parse_line` raise LineError with the reason; the caller adds
the line number.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from src.providers.embedding import MEMORY_TYPE_PREFIXES
from src.recall.bulk_import import ImportRecord
from src.recall.store import NewMemory

IMPORT_FIELDS = ("content", "memory_type", "event_time", "source_tag", "metadata", "conversation", "turn")
EXPORT_FIELDS = ("id", "alpha", "beta", "immutable", "protected", "source_confidence", "compressed",
                 "content_contextualized", "conversation_context", "created_at", "access_count", "last_accessed",
                 "access_timestamps", "utility_score", "supersedes", "embed_model")
KNOWN_FIELDS = frozenset(IMPORT_FIELDS + EXPORT_FIELDS)
#: Source tag of imported lines that name none.
DEFAULT_SOURCE_TAG = "import"
#: What made a supersedes link (memory_supersedes.via, sql/030 and sql/153); the first is the column default.
SUPERSEDES_VIA = ("insight", "merge", "narrative", "update")
#: The longest text a line may carry by default: agent.max_input_chars's default, so an
#: import holds memories to what a typed line is held to.
DEFAULT_MAX_CHARS = 1_000_000
#: A contextualised text is a short context (evolution.contextual.context_chars, 300 by
#: default) before the content: it may exceed the content's limit by this much.
MAX_CONTEXT_EXTRA = 10_000
#: JSON nesting allowed in a line (the object itself is level 1). Metadata the mind writes
#: nests a few levels; the parser's recursion gives out near 1,000.
MAX_JSON_DEPTH = 64
#: The largest int a counter column (INTEGER) holds.
MAX_INT4 = 2**31 - 1


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
    try:                            # an integer past a float's range cannot be a weight
        finite = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
    except OverflowError:
        finite = False
    if not finite:
        raise LineError(f"'{name}' must be a finite number, got {value!r:.40}")
    if positive and value <= 0:
        raise LineError(f"'{name}' must be > 0, got {value!r}")
    if unit and not 0 <= value <= 1:
        raise LineError(f"'{name}' must be in [0, 1], got {value!r}")
    return float(value)


def _int(data: dict, name: str, most: int = 2**63 - 1) -> int | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        raise LineError(f"'{name}' must be a whole number from 0 to {most}, got {value!r}")
    return value


def _text(data: dict, name: str, default: str | None, max_chars: int | None = None) -> str | None:
    value = data.get(name, default)
    if value is not None and not isinstance(value, str):
        raise LineError(f"'{name}' must be a string, got {type(value).__name__}")
    if value is not None and max_chars is not None and len(value) > max_chars:
        raise LineError(f"'{name}' is {len(value):,} characters; at most {max_chars:,} are imported")
    return value


def decode_line(raw: bytes) -> str:
    """A line's bytes as text; LineError names the first byte that is not UTF-8.

    Strict, not replacing: a memory whose bytes were lost would be stored as if whole.
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LineError(f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1}: "
                        f"{exc.reason})") from None


def json_depth(value: Any) -> int:
    """How deep `value` nests (a scalar is 0, `{}` is 1); iterative, so depth cannot overflow it."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            stack.extend((v, depth) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def _load(text: str) -> Any:
    """The line's JSON value; LineError for bad JSON, nesting past MAX_JSON_DEPTH, or a number
    Python will not convert (an integer of more than 4,300 digits)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        # json's message for a control character already ends in "at" ("Invalid control
        # character at"): said twice it read "at at column 26"
        raise LineError(f"not valid JSON ({exc.msg.removesuffix(' at')} at column {exc.colno})") from None
    except RecursionError:
        raise LineError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:       # its first clause: the rest suggests changing the interpreter
        raise LineError(f"not valid JSON ({str(exc).split(':')[0]})") from None
    if json_depth(data) > MAX_JSON_DEPTH:
        raise LineError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return data


def _supersedes(value: Any) -> tuple[tuple[int, str], ...]:
    """(export id, via) per link: `{"id", "via"}` objects, or plain ids (older exports: via insight)."""
    if not isinstance(value, list):
        raise LineError("'supersedes' must be a list of memory ids or {\"id\", \"via\"} objects")
    links = []
    for item in value:
        ref, via = item, SUPERSEDES_VIA[0]
        if isinstance(item, dict):
            ref, via = item.get("id"), item.get("via", via)
        if isinstance(ref, bool) or not isinstance(ref, int):
            raise LineError(f"'supersedes' must hold memory ids, got {ref!r}")
        if via not in SUPERSEDES_VIA:
            raise LineError(f"'supersedes' via must be one of {', '.join(SUPERSEDES_VIA)}, got {via!r}")
        links.append((ref, via))
    return tuple(links)


def _flag(data: dict, name: str) -> bool:
    value = data.get(name, False)
    if not isinstance(value, bool):
        raise LineError(f"'{name}' must be true or false, got {value!r}")
    return value


def _object(text: str) -> dict:
    """The line's JSON object with known fields only."""
    data = _load(text)
    if not isinstance(data, dict):
        raise LineError(f"expected a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - KNOWN_FIELDS)
    if unknown:
        raise LineError(f"unknown field(s) {', '.join(map(repr, unknown))}; "
                        f"known: {', '.join(IMPORT_FIELDS)} (and the export fields)")
    return data


def _content_problem(content: Any) -> str:
    """Why `content` is no memory text: missing, not text (named by its JSON type), empty, blank."""
    if content is None:
        return "'content' is missing"
    if not isinstance(content, str):
        kind = {bool: "true or false", int: "a number", float: "a number", list: "a list",
                dict: "an object"}.get(type(content), type(content).__name__)
        return f"'content' must be text, got {kind}"
    return "'content' is empty" if not content else "'content' is only whitespace"


def _memory(data: dict, max_chars: int) -> NewMemory:
    content = data.get("content")
    if not isinstance(content, str) or not content.strip():
        raise LineError(_content_problem(content))
    _text(data, "content", None, max_chars)
    memory_type = _text(data, "memory_type", "episodic")
    if memory_type not in MEMORY_TYPE_PREFIXES:
        raise LineError(f"unknown memory_type {memory_type!r}; expected one of: "
                        f"{', '.join(MEMORY_TYPE_PREFIXES)}")
    metadata = data.get("metadata", {})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise LineError(f"'metadata' must be a JSON object, got {type(metadata).__name__}")
    return NewMemory(
        content=content, memory_type=memory_type,
        source_tag=_text(data, "source_tag", DEFAULT_SOURCE_TAG) or DEFAULT_SOURCE_TAG,
        source_confidence=_number(data, "source_confidence", 1.0, unit=True),
        event_time=_time(data.get("event_time"), "event_time"),
        compressed=_text(data, "compressed", None, max_chars), immutable=_flag(data, "immutable"),
        alpha=_number(data, "alpha", 1.0, positive=True), beta=_number(data, "beta", 4.0, positive=True),
        metadata=metadata, context=_text(data, "conversation_context", None, MAX_CONTEXT_EXTRA),
    )


def parse_line(text: str, line: int, max_chars: int = DEFAULT_MAX_CHARS) -> ImportRecord | None:
    """One line → an ImportRecord; None for a blank line; LineError says what is wrong.

    `max_chars` bounds each text (content, compressed; the contextualised text gets
    MAX_CONTEXT_EXTRA more).
    """
    if not text.strip():
        return None
    data = _object(text)
    memory = _memory(data, max_chars)
    conversation = _conversation(data)
    if conversation is not None and "conversation" not in memory.metadata:
        # the deep pass joins no two imported conversations (src/consolidation/deep/evidence.py)
        memory = replace(memory, metadata={**memory.metadata, "conversation": conversation})
    stamps = data.get("access_timestamps", [])
    if not isinstance(stamps, list):
        raise LineError("'access_timestamps' must be a list of ISO 8601 times")
    return ImportRecord(
        memory=memory, line=line, created_at=_time(data.get("created_at"), "created_at"),
        access_count=_int(data, "access_count", MAX_INT4) or 0,
        last_accessed=_time(data.get("last_accessed"), "last_accessed"),
        access_timestamps=tuple(_time(s, "access_timestamps") for s in stamps),
        utility_score=_number(data, "utility_score", 0.0), ref=_int(data, "id"),
        supersedes=_supersedes(data.get("supersedes", [])), protected=_flag(data, "protected"),
        content_contextualized=_text(data, "content_contextualized", None, max_chars + MAX_CONTEXT_EXTRA),
        conversation=conversation, turn=_int(data, "turn"),
    )


def _conversation(data: dict) -> str | None:
    """The line's conversation id: text, or a number written as one (an id is a name)."""
    value = data.get("conversation")
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return None if value is None else str(value)
    if not isinstance(value, str) or not value.strip():
        raise LineError("'conversation' must name a conversation (a non-empty text or a number)")
    return value
