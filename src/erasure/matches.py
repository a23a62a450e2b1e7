"""What a forget would take, listed before anything is removed (issue 39 item 1).

By id: the memories named. By words: every memory whose text holds them, and the lines
outside the memory store that hold them too — items held for the guardian (copilot),
unflushed scratch rows (working memory) and input-journal lines. The guardian answers the
listing "y", "n" or with numbers (src/erasure/question.py); only what is chosen is
forgotten, and the words themselves are scrubbed from every log (src/erasure/scrub.py).

Words are matched as case-insensitive substrings (`strpos`), not as full-text lexemes:
"7419" must find "code 7419," and a pattern character typed by the guardian ("%", "_")
means itself. `/forget <words>` and `--match` look for the words as typed; a request in
conversation ("forget that my locker code is 7731") for each of its content words, in any
order ("My gym locker code is 7731." holds locker, code and 7731).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from src.db.sql import Executor
from src.gates.utterance import content_words
from src.recall.dated import short_when
from src.terminal import escape
from src.text import excerpt

#: Memories listed at most for one forget by words; more means the words are too common.
MAX_MEMORIES = 200
#: Lines of each other kind listed at most.
MAX_LINES = 50
PREVIEW_CHARS = 100

QUESTION = "Forget these {n}? (y/n/numbers)"
_YES = {"y", "yes", "all", "forget"}
_NO = {"n", "no", "none", "keep", "cancel"}
_NUMBERS = re.compile(r"^\d+(?:\s*[,\s]\s*\d+)*$")


@dataclass(frozen=True)
class Match:
    """One thing a forget would take: a memory, or a line outside the memory store."""

    kind: str              # memory | held | scratch | journal
    id: int                # memories.id, scratch_buffer.id (held and scratch) or input_journal.id
    text: str
    at: datetime
    detail: str = ""       # a memory's type and source tag


_BY_IDS = """
SELECT id, content, memory_type, source_tag, COALESCE(event_time, created_at) AS at
  FROM memories WHERE id = ANY($1::bigint[]) ORDER BY id
"""
_MEMORIES = """
SELECT id, content, memory_type, source_tag, COALESCE(event_time, created_at) AS at
  FROM memories m WHERE {holds} ORDER BY id LIMIT $2
"""
_HELD = """
SELECT b.id, b.content, h.held_at AS at FROM held_memories h JOIN scratch_buffer b ON b.id = h.scratch_id
 WHERE {holds} ORDER BY b.id LIMIT $2
"""
_SCRATCH = """
SELECT b.id, b.content, b.created_at AS at FROM scratch_buffer b
 WHERE {holds}
   AND NOT EXISTS (SELECT 1 FROM held_memories h WHERE h.scratch_id = b.id)
 ORDER BY b.id LIMIT $2
"""
#: Journal lines whose words are not already a memory or a buffered row listed above: a
#: line typed is usually also a scratch row and then a memory, and the guardian should see
#: each thing once. The forget scrubs every journal line holding the words anyway.
_JOURNAL = """
SELECT j.id, j.line AS content, j.received_at AS at FROM input_journal j
 WHERE j.kind = 'message' AND {holds} AND NOT j.id = ANY($3::bigint[])
   AND NOT EXISTS (SELECT 1 FROM memories m WHERE m.content = j.line)
   AND NOT EXISTS (SELECT 1 FROM scratch_buffer b WHERE b.content = j.line)
 ORDER BY j.id LIMIT $2
"""


async def by_ids(db: Executor, ids: Sequence[int]) -> tuple[list[Match], list[int]]:
    """The memories of `ids` that exist, and the ids that name none."""
    rows = await db.fetch(_BY_IDS, sorted(set(ids)))
    found = {r["id"] for r in rows}
    return [_memory(r) for r in rows], sorted(set(ids) - found)


def _holds(column: str) -> str:
    """SQL: `column` holds every term of $1 (lower-cased)."""
    return f"NOT EXISTS (SELECT 1 FROM unnest($1::text[]) AS w WHERE strpos(lower({column}), w) = 0)"


def terms(words: str, *, each_word: bool = False) -> list[str]:
    """What a text must hold: `words` as typed, or (`each_word`) each of its content words."""
    words = " ".join(words.split()).lower()
    if not each_word:
        return [words] if words else []
    found = sorted(content_words(words))
    return found or ([words] if words else [])


async def by_words(db: Executor, words: str, *, each_word: bool = False,
                   exclude_lines: Sequence[int] = ()) -> list[Match]:
    """Every memory, held item, scratch row and journal line whose text holds `words` (see
    `terms`); `exclude_lines`: journal ids not to list (the request itself)."""
    needed = terms(words, each_word=each_word)
    if not needed:
        return []
    rows = await db.fetch(_MEMORIES.format(holds=_holds("m.content")), needed, MAX_MEMORIES)
    out = [_memory(r) for r in rows]
    for kind, sql, column in (("held", _HELD, "b.content"), ("scratch", _SCRATCH, "b.content")):
        out += [Match(kind, r["id"], r["content"], r["at"])
                for r in await db.fetch(sql.format(holds=_holds(column)), needed, MAX_LINES)]
    out += [Match("journal", r["id"], r["content"], r["at"]) for r in await db.fetch(
        _JOURNAL.format(holds=_holds("j.line")), needed, MAX_LINES, [int(i) for i in exclude_lines])]
    return out


async def previous_line(db: Executor, before: int | None) -> str | None:
    """The user's message typed just before journal line `before` (the newest without it)."""
    return await db.fetchval(
        "SELECT line FROM input_journal WHERE kind = 'message' AND ($1::bigint IS NULL OR id < $1) "
        "AND line NOT LIKE '[forgotten: %' AND line NOT LIKE '[not kept: %' ORDER BY id DESC LIMIT 1", before)


def _memory(r) -> Match:
    return Match("memory", r["id"], r["content"], r["at"], f"{r['memory_type']}, {r['source_tag']}")


def listing(matches: Sequence[Match], now: datetime) -> str:
    """The numbered list the guardian answers, one line an item, text escaped and cut."""
    lines = []
    for n, m in enumerate(matches, 1):
        what = f"memory #{m.id} ({m.detail})" if m.kind == "memory" else _LINE_KINDS[m.kind]
        lines.append(f"  {n}. {what}, {short_when(m.at, now)}: {escape(excerpt(m.text, PREVIEW_CHARS))}")
    return "\n".join(lines)


_LINE_KINDS = {"held": "held for your decision", "scratch": "just said, not yet consolidated",
               "journal": "input line"}


def question(n: int) -> str:
    return QUESTION.format(n=n)


def choose(line: str, matches: Sequence[Match]) -> list[Match] | str | None:
    """The guardian's answer to the listing: the chosen matches ([] for "n"), a string
    when the line names numbers that are not listed, None when it is no answer."""
    text = line.strip().lower()
    if text in _YES:
        return list(matches)
    if text in _NO:
        return []
    if _NUMBERS.match(text):
        numbers = {int(n) for n in re.findall(r"\d+", text)}
        bad = sorted(n for n in numbers if not 1 <= n <= len(matches))
        if bad:
            return (f"there is no item {', '.join(map(str, bad))}; answer y, n or numbers "
                    f"from 1 to {len(matches)}")
        return [matches[n - 1] for n in sorted(numbers)]
    return None
