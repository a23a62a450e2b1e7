"""The entry gate (plan §2.9): a fast stochastic filter on everything that comes in.

Three rules, checked in this order:

- short: fewer than `short_chars` characters after trimming -> skip with
  probability `short_skip_rate` (0.95), else buffer;
- mechanical: machine output rather than something said (see `mechanical_reason`)
  -> skip with probability `mechanical_skip_rate` (0.90), else buffer;
- content: everything else -> always buffered, with preliminary tags.

The rules are stochastic on purpose: a short "I'm sad." or a pasted error can matter,
and a gate that never lets a class through can never learn that it should (§4.5).
What is kept becomes a `scratch_buffer` row before anything else happens to it, so a
crash loses nothing; every decision, skips included, is a `gate_decisions` row.

Mechanical output, precisely. Content is mechanical when any of these holds:

1. stack_trace: a Python "Traceback (most recent call last):" header; two or more
   stack-frame lines (Python `File "…", line N`, Java/JavaScript `at f(file:1)`);
   a Go `panic:` / `goroutine N [` header; or the whole text is one exception line
   such as `ValueError: invalid literal`.
2. structured_dump: the trimmed text parses as a JSON object or array, or is markup
   (starts with `<`, ends with `>`, and tags are most of it).
3. command_echo: every non-empty line starts with a shell prompt (`$ `, `>>> `,
   `PS C:\\> `, `user@host:~$ `): a pasted terminal command.
4. progress_bar: a percentage followed by a bar (`45%|████`, `[=====>   ]`), a run of
   eight or more block characters, or tqdm's `12/100 [00:01<00:07`.
5. log_lines: at least 60% of the non-empty lines start with a timestamp
   (`2024-05-01 12:00`, `12:00:01`) or an upper-case log level written the way
   loggers write it (`[WARN]`, `INFO:`, or `ERROR` followed by column padding).
6. diff: a `diff --git` line or an `@@ -a,b +c,d @@` hunk header.
7. non_letters: letters are under 40% of the visible characters (digits, symbols,
   punctuation: tables of numbers, ASCII art, hex dumps). Emoji and other symbols
   of Unicode category So/Sk are not counted at all, so "😀😀😀" stays human.
8. opaque_tokens: more than half of the visible characters sit in unbroken tokens of
   32+ characters that are not URLs (hashes, base64, minified code).

Text that merely talks about errors ("I got a TypeError when I ran it") is none of
these; the tests hold both sides.
"""

from __future__ import annotations

import json
import logging
import random
import re
import unicodedata
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import asyncpg
import numpy as np

from src.errors import InputRejected
from src.gates import scratch
from src.gates.contradiction import has_negation
from src.gates.modes import unkept_text
from src.gates.settings import EntryGateSettings
from src.text import clean_text

log = logging.getLogger(__name__)

_TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):", re.M)
_FRAME = re.compile(r'^\s*(File "[^"]+", line \d+|at [\w$.<>\[\]/-]+ ?\(.*:\d+(:\d+)?\)\s*$)', re.M)
_GO_PANIC = re.compile(r"^(panic: |goroutine \d+ \[)", re.M)
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Warning|Fault)(: .*)?$")
_PROMPT = re.compile(r"^\s*(\$ |>>> |PS [^>\n]*> |[\w.-]+@[\w.-]+(:\S*)?[$#] )")
_PROGRESS = re.compile(r"\d{1,3}(\.\d+)?%\s*\|?\s*[█▉▊▋▌▍▎▏#=>]{3,}|\[[#=>.\- ]{8,}\]|[█▓▒░]{8,}"
                       r"|\d+/\d+ \[\d+:\d+<")
_TIMESTAMP_START = re.compile(r"^\s*\[?(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}|\d{2}:\d{2}:\d{2})")
_LEVELS = r"(TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|CRITICAL|FATAL)"
_LEVEL_START = re.compile(rf"^\s*(\[{_LEVELS}\]|{_LEVELS}:|{_LEVELS} {{2,}})")
_DIFF = re.compile(r"^(diff --git |@@ -\d+(,\d+)? \+\d+(,\d+)? @@)", re.M)
_MARKUP_TAG = re.compile(r"<[^<>]+>")
_URL = re.compile(r"https?://\S+")
_FIRST_PERSON = re.compile(r"\b(I|I'm|I've|I'd|I'll|me|my|mine|myself)\b")
_CODE = re.compile(r"```|^\s*(def|class|import|function|const|let|var|return)\b.*$", re.M)

#: Characters of an entry's content kept in `gate_decisions.content_preview`.
PREVIEW_CHARS = 200


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _is_structured_dump(stripped: str) -> bool:
    if stripped[:1] in "{[" and stripped[-1:] in "}]":
        try:
            return isinstance(json.loads(stripped), dict | list)
        except ValueError:
            return False
    if stripped.startswith("<") and stripped.endswith(">"):
        tags = sum(len(m) for m in _MARKUP_TAG.findall(stripped))
        return tags >= 0.5 * len(stripped)
    return False


def _visible_counts(text: str) -> tuple[int, int]:
    """(letters, visible characters), ignoring whitespace and emoji-like symbols."""
    letters = visible = 0
    for ch in text:
        if ch.isspace() or unicodedata.category(ch) in ("So", "Sk"):
            continue
        visible += 1
        letters += ch.isalpha()
    return letters, visible


def mechanical_reason(text: str) -> str | None:
    """Which rule makes `text` machine output (see the module docstring), or None."""
    stripped = text.strip()
    if not stripped:
        return None
    lines = _lines(stripped)
    if (_TRACEBACK.search(stripped) or len(_FRAME.findall(stripped)) >= 2
            or _GO_PANIC.search(stripped)
            or (len(lines) == 1 and _EXCEPTION_LINE.match(stripped))):
        return "stack_trace"
    if _is_structured_dump(stripped):
        return "structured_dump"
    if all(_PROMPT.match(line) for line in lines):
        return "command_echo"
    if _PROGRESS.search(stripped):
        return "progress_bar"
    logged = sum(bool(_TIMESTAMP_START.match(x) or _LEVEL_START.match(x)) for x in lines)
    if logged >= 0.6 * len(lines):
        return "log_lines"
    if _DIFF.search(stripped):
        return "diff"
    letters, visible = _visible_counts(stripped)
    if visible >= 10 and letters < 0.4 * visible:
        return "non_letters"
    opaque = sum(len(tok) for tok in stripped.split()
                 if len(tok) >= 32 and not _URL.fullmatch(tok))
    if visible and opaque > 0.5 * visible:
        return "opaque_tokens"
    return None


def preliminary_tags(text: str) -> list[str]:
    """Cheap tags stored with a buffered item; the exit gate and consolidation refine them."""
    tags = []
    stripped = text.strip()
    if stripped.endswith("?"):
        tags.append("question")
    if _FIRST_PERSON.search(stripped):
        tags.append("first_person")
    if has_negation(stripped):
        tags.append("negated")
    if _URL.search(stripped):
        tags.append("url")
    if _CODE.search(stripped):
        tags.append("code")
    if len(_lines(stripped)) > 1:
        tags.append("multiline")
    return tags


@dataclass(frozen=True)
class EntryDecision:
    """What the entry gate decided for one piece of content, and why."""

    action: str                 # buffer | skip
    rule: str                   # short | mechanical | content
    reason: str
    tags: tuple[str, ...]
    draw: float | None          # the uniform draw (None for the deterministic content rule)
    skip_rate: float | None
    mechanical: str | None = None


def decide_entry(text: str, rng: random.Random, settings: EntryGateSettings) -> EntryDecision:
    """Apply the three rules to `text`; one draw from `rng` for the stochastic ones."""
    tags = preliminary_tags(text)
    size = len(text.strip())
    if size < settings.short_chars:
        rule, rate, why, kind = "short", settings.short_skip_rate, f"{size} characters", None
    else:
        kind = mechanical_reason(text)
        if kind is None:
            return EntryDecision("buffer", "content", "content is buffered", tuple(tags), None, None)
        rule, rate, why = "mechanical", settings.mechanical_skip_rate, f"mechanical: {kind}"
        tags.append(f"mechanical:{kind}")
    tags.insert(0, rule)
    draw = rng.random()
    action = "skip" if draw < rate else "buffer"
    verb = "skipped" if action == "skip" else "kept"
    reason = f"{why}; {verb} (draw {draw:.4f} vs skip rate {rate:.2f})"
    return EntryDecision(action, rule, reason, tuple(tags), draw, rate, kind)


@dataclass(frozen=True)
class Admitted:
    """The entry gate's answer: its decision and, when buffered, the scratch row id."""

    decision: EntryDecision
    scratch_id: int | None


class EntryGate:
    """Decides, writes the scratch row (when kept) and the decision row, in one statement."""

    def __init__(self, pool: asyncpg.Pool, settings: EntryGateSettings, rng: random.Random,
                 ttl: timedelta):
        self.pool = pool
        self.settings = settings
        self.rng = rng
        self.ttl = ttl

    async def admit(self, content: str, *, source_tag: str = "external_user",
                    source_confidence: float = 1.0,
                    metadata: dict[str, Any] | None = None, focus: np.ndarray | None = None) -> Admitted:
        """Run `content` through the gate; a kept item is in scratch_buffer on return, with the
        attention `focus` it was said under when known (the exit gate judges it by that).

        The content is cleaned (src/text.clean_text) first; empty content is refused
        with InputRejected and nothing is recorded.
        """
        content = clean_text(content).text
        if not content.strip():
            raise InputRejected("the entry gate got empty content (after removing NUL bytes "
                                "and whitespace); nothing was buffered")
        decision = decide_entry(content, self.rng, self.settings)
        record = scratch.EntryRecord(
            content=content, source_tag=source_tag, source_confidence=source_confidence,
            tags=list(decision.tags), metadata=dict(metadata or {}), rule=decision.rule,
            reason=decision.reason, draw=decision.draw, skip_rate=decision.skip_rate,
            preview=content[:PREVIEW_CHARS], mechanical=decision.mechanical, focus=focus,
        )
        if decision.action == "skip":
            await scratch.record_skip(self.pool, record)
            log.debug("entry gate skipped a %s item: %s", source_tag, decision.reason)
            return Admitted(decision, None)
        scratch_id = await scratch.buffer(self.pool, record, self.ttl)
        return Admitted(decision, scratch_id)

    async def admit_unkept(self, content: str, *, source_tag: str = "external_user",
                           source_confidence: float = 1.0, metadata: dict[str, Any] | None = None) -> Admitted:
        """Memory mode off (src/gates/modes.py): no rule is applied — nothing of the item can
        be kept, so there is nothing to judge — and no word of it is written. The scratch row
        and the decision hold `unkept_text`; the row's tag (in `metadata`) marks its journal
        line as typed while off, and keeps the exit gate away from it."""
        placeholder = unkept_text(clean_text(content).text)
        decision = EntryDecision("buffer", "off", "memory mode off: not judged, and only the size is kept",
                                 (), None, None)
        record = scratch.EntryRecord(
            content=placeholder, source_tag=source_tag, source_confidence=source_confidence, tags=[],
            metadata=dict(metadata or {}), rule=decision.rule, reason=decision.reason, draw=None,
            skip_rate=None, preview=placeholder, mechanical=None,
        )
        return Admitted(decision, await scratch.buffer(self.pool, record, self.ttl))
