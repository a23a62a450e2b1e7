"""The input spill file: typed lines held while the database is away (src/loop/input_journal.py).

One JSON object a line — {"kind", "line", "session", "key", "channel"} — appended and fsynced, so a
SIGKILL during an outage loses nothing acknowledged. It is read at the next start (or when
the database is back) and moved into the journal.

A spill file is read line by line and never trusted (issue 41 item 8): bytes that are not
UTF-8, JSON that is not an object, a missing or unknown kind, a text that is not a string,
NULs and control characters, a text longer than a typed line may be (`agent.max_input_chars`)
— each such line is named in the log (its number and why, never its words) and kept aside,
byte for byte, in the quarantine file beside the spill (`<spill>.quarantine`), where the
guardian can read it; the good lines of the same file are stored. A line cut by a crash
mid-write (never acknowledged) is one of those. A directory or anything else that is not a
regular file at the spill's path is moved aside whole. Nothing is deleted unread, and
nothing in a spill file can stop the mind from starting.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from src.text import clean_text

log = logging.getLogger(__name__)

KINDS = ("message", "command")
CHANNELS = ("terminal", "api", "page", "mcp")   # input_journal.channel (sql/161)
_JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


@dataclass(frozen=True)
class Spilled:
    """A good line of a spill file."""

    kind: str
    text: str
    key: str
    channel: str = "terminal"


def append(path: Path, lines: Sequence[tuple[str, str, str, str]], session_id: str) -> None:
    """Append (kind, text, key, channel) lines and fsync: held input must survive a SIGKILL."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps({"kind": kind, "line": text, "session": session_id, "key": key, "channel": channel},
                              ensure_ascii=False) + "\n" for kind, text, key, channel in lines)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, data.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def _check(raw: bytes, max_chars: int | None) -> Spilled | str:
    """The line, or why it is bad."""
    try:
        item = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "not UTF-8"
    except ValueError:
        return "not JSON (a line cut by a crash mid-write is never acknowledged)"
    if not isinstance(item, dict):
        return f"a JSON {_JSON_KINDS.get(type(item), 'value')}, not an object"
    if item.get("kind") not in KINDS:
        return "no known kind"
    text = item.get("line")
    if not isinstance(text, str):
        return "its text is not a string"
    text = clean_text(text).text
    if not text.strip():
        return "an empty text"
    if max_chars is not None and len(text) > max_chars:
        return f"{len(text):,} characters, over the {max_chars:,} a typed line may have (agent.max_input_chars)"
    kind = "command" if text.lstrip().startswith("/") else "message"   # the text says what it is
    key = item.get("key")
    try:
        key = str(uuid.UUID(key)) if isinstance(key, str) else str(uuid.uuid4())
    except ValueError:
        key = str(uuid.uuid4())   # a spill written before line keys existed: a new one
    channel = item.get("channel", "terminal")   # a spill written before channels: the terminal's
    if channel not in CHANNELS:
        return "no known channel"
    return Spilled(kind, text, key, channel)


def read(path: Path, max_chars: int | None = None) -> list[Spilled]:
    """The good lines of the spill at `path`; bad ones go to its quarantine file (see the
    module docstring). Never raises for what the file holds."""
    if not os.path.lexists(path):
        return []
    if not path.is_file() or path.is_symlink():
        aside = _aside(path)
        os.replace(path, aside)
        log.warning("the input spill path %s was not a regular file; moved aside to %s", path, aside)
        return []
    good: list[Spilled] = []
    bad: list[tuple[int, str, bytes]] = []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), 1):
        if not raw.strip():
            continue
        found = _check(raw, max_chars)
        if isinstance(found, str):
            bad.append((number, found, raw))
        else:
            good.append(found)
    if bad:
        quarantine = path.with_name(path.name + ".quarantine")
        fd = os.open(quarantine, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, b"".join(raw + b"\n" for _, _, raw in bad))
            os.fsync(fd)
        finally:
            os.close(fd)
        for number, why, _ in bad:
            log.warning("input spill %s line %d kept aside in %s: %s", path.name, number, quarantine.name, why)
    return good


def _aside(path: Path) -> Path:
    n = 1
    while os.path.lexists(aside := path.with_name(f"{path.name}.aside-{n}")):
        n += 1
    return aside
