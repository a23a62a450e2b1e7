"""Whose life the deep pass reflects on (issue 38 item 6): the user's, not strangers'.

A store can hold thousands of imported turns of other people's chats beside a few dozen of
the user's own words. Read by recency and search alone, a pass on such a store asked its
questions about strangers, joined two people from different conversations in one insight
("Jolene and Caroline are adorable together") and called a stranger's hobby the user's
("The user expresses a general interest in playing video games"). So:

- **the questions' input** (`reflection_input`): the newest of the user's and the mind's own
  memories; imported strangers' lines only to fill what is left, at most `deep.imported_share`
  of the input (0 by default: with a quarter, a 1.5B model asked "Who is Nebraas?" and "Who is
  Nicolas?" beside one question about the user), from one imported conversation (the newest).
  A store with fewer than `MIN_OWN` memories of the user's and the mind's own (a store of
  imported chats only) is read from one imported conversation instead, so it still reflects;
- **the themes** the questions see (`own_themes`): only those noticed among the user's and the
  mind's own memories;
- **a question's evidence** (`user_first`): the hits a question retrieves (the own arm on
  for a question about the user, `OWN_WEIGHT`), reordered: the user's statements, then the
  mind's own and what names no speaker, then — unless the question is about the user —
  strangers' lines of one imported conversation only, the one of the best-ranked stranger's
  line; cut to `deep.insight_evidence`;
- **what an insight may cite** (integrity.screen): an insight that speaks of "the user" cites
  at least one of the user's statements (`speaks_of_user`), and strangers' lines of one
  conversation only (`conversations`).

A conversation is the line's `metadata.conversation` (kept at import, src/memory/jsonl.py);
lines imported without one count one conversation per speaker, so a line of theirs is never
joined with another speaker's.

A stranger is src/dmn/sampling.imported_stranger's: a named person's line, or one imported with
no speaker; the mind's thought about such a line counts as the stranger's.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from src.db.sql import Executor
from src.dmn.sampling import imported_stranger
from src.recall.speakers import Speaker, speaker_of

T = TypeVar("T")

#: The own arm's weight in a question's search when it asks about the user (the offline
#: embedder's recall weight, src/recall/settings.py: the user's lines among strangers' chat).
OWN_WEIGHT = 1.0
#: A question or an insight that speaks of the user, in the third person the pass asks for.
_OF_USER = re.compile(r"\b(?:the\s+)?user(?:'s|’s|s)?\b", re.IGNORECASE)
#: Hits a question retrieves before the reordering, per piece of evidence kept: strangers of
#: other conversations are dropped, so the search looks further than the evidence it keeps.
SEARCH_DEPTH = 3


def speaks_of_user(text: str) -> bool:
    """Whether `text` (a question, an insight) is about the user: it names "the user"."""
    return _OF_USER.search(text) is not None


def _field(item: Any, name: str) -> Any:
    if isinstance(item, Mapping) or hasattr(item, "get"):
        return item.get(name)
    return getattr(item, name, None)


def _metadata(item: Any) -> dict[str, Any]:
    raw = _field(item, "metadata")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    return dict(raw) if isinstance(raw, Mapping) else {}


def speaker(item: Any) -> Speaker | None:
    """Who said a row or a hit (src/recall/speakers.speaker_of)."""
    return speaker_of(_field(item, "source_tag"), _metadata(item))


def is_stranger(item: Any) -> bool:
    """An imported stranger's line (module docstring). A row says whether it was imported
    (`imported`); a hit does not, and one with no speaker is a stranger's when its source tag
    is the import's default (src/memory/jsonl.DEFAULT_SOURCE_TAG)."""
    imported = _field(item, "imported")
    if imported is None:
        imported = _field(item, "source_tag") == "import"
    meta = _metadata(item)
    return imported_stranger(speaker(item), bool(imported), meta.get("kind"), _field(item, "content") or "")


def conversation(item: Any) -> str:
    """The imported conversation a stranger's line is a turn of (module docstring)."""
    meta = _metadata(item)
    given = meta.get("conversation")
    if isinstance(given, str | int) and not isinstance(given, bool) and str(given).strip():
        return f"conversation {given}"
    who = speaker(item)
    return f"speaker {who.name if who is not None and who.name else '?'}"


def conversations(items: Sequence[Any]) -> set[str]:
    """The imported conversations the strangers' lines among `items` belong to."""
    return {conversation(i) for i in items if is_stranger(i)}


def is_users(item: Any) -> bool:
    who = speaker(item)
    return who is not None and who.kind == "user"


def user_first(hits: Sequence[T], limit: int, *, strangers: bool = True) -> list[T]:
    """A question's evidence, at most `limit`: the user's statements, then the mind's own and
    what names no speaker, then (with `strangers`) strangers' lines of the best-ranked
    stranger's conversation; each group in the order given (best first)."""
    theirs = [h for h in hits if is_stranger(h)] if strangers else []
    kept = conversation(theirs[0]) if theirs else None
    users = [h for h in hits if not is_stranger(h) and is_users(h)]
    own = [h for h in hits if not is_stranger(h) and not is_users(h)]
    return (users + own + [h for h in theirs if conversation(h) == kept])[:limit]


# whether a row is an imported stranger's, roughly, in SQL: a named person, or an import with
# no speaker and a source tag that names none; `is_stranger` decides exactly on what is read
_STRANGER_SQL = r"""CASE WHEN metadata ->> 'kind' IN ('value', 'goal') THEN false
                         WHEN jsonb_typeof(metadata -> 'speaker') = 'string'
                          AND btrim(metadata ->> 'speaker', E' \t\n\r') <> ''
                         THEN lower(btrim(metadata ->> 'speaker', E' \t\n\r'))
                              NOT IN ('user', 'self', 'thought', 'conclusion', 'correction')
                         ELSE import_key IS NOT NULL AND source_tag = 'import' END"""

_REFLECTION_INPUT = f"""
WITH m AS MATERIALIZED (
    SELECT id, content, memory_type, created_at, compressed, source_tag, metadata,
           import_key IS NOT NULL AS imported, {_STRANGER_SQL} AS stranger
      FROM memories
     WHERE memory_type NOT IN ('tension', 'narrative')
       AND NOT (memory_type = 'reflection' AND metadata ->> 'kind' = 'insight')
       -- the boundaries are in every context and were written, not lived: a 1.5B model asked
       -- only "Who said I do not deceive my guardian…?" of them
       AND NOT immutable AND source_tag <> 'bootstrap_seed')
(SELECT * FROM m WHERE NOT stranger ORDER BY created_at DESC, id DESC LIMIT $1)
UNION ALL
(SELECT * FROM m WHERE stranger ORDER BY created_at DESC, id DESC LIMIT $2)
"""


def strangers_allowed(limit: int, share: float) -> int:
    """How many of the questions' `limit` lines may be imported strangers' at most."""
    return math.floor(limit * share + 1e-9)


#: Fewer memories of the user's and the mind's own than this, and the questions read one
#: imported conversation instead (a store of imported chats only still reflects).
MIN_OWN = 3


async def reflection_input(conn: Executor, limit: int, share: float) -> list[Mapping[str, Any]]:
    """The questions phase's input, newest first: the user's and the mind's own memories,
    then strangers' lines of one conversation to fill what is left, at most `share` × `limit`,
    or all that is left when the own are fewer than `MIN_OWN` (module docstring). Insights,
    narratives and tensions are the pass's own, and the boundaries the guardian's: left out."""
    rows = [dict(r) for r in await conn.fetch(_REFLECTION_INPUT, limit, limit)]
    # the mind's thought about a stranger's line is the stranger's (is_stranger): left out
    own = [r for r in rows if not r["stranger"] and not is_stranger(r)][:limit]
    strangers = [r for r in rows if r["stranger"]]
    kept = conversation(strangers[0]) if strangers else None
    room = limit - len(own) if len(own) < MIN_OWN else min(strangers_allowed(limit, share), limit - len(own))
    theirs = [r for r in strangers if conversation(r) == kept][:max(0, room)]
    return sorted(own + theirs, key=lambda r: (r["created_at"], r["id"]), reverse=True)


async def own_themes(conn: Executor, limit: int) -> list[str]:
    """The labels of the newest themes the light ticker noticed among the user's and the mind's
    own memories, at most `limit`: a theme of strangers' lines ("What do you think of this lost
    and found poster") became the pass's questions, all three of them, in a 1.5B model's run."""
    themes = await conn.fetch(
        "SELECT memory_ids, details FROM consolidation_findings WHERE kind = 'theme' ORDER BY at DESC LIMIT $1",
        limit * 4)
    ids = sorted({i for t in themes for i in t["memory_ids"]})
    rows = {r["id"]: r for r in await conn.fetch(
        "SELECT id, content, source_tag, metadata, import_key IS NOT NULL AS imported FROM memories "
        "WHERE id = ANY($1::bigint[])", ids)}
    labels = []
    for t in themes:
        members = [rows[i] for i in t["memory_ids"] if i in rows]
        label = json.loads(t["details"]).get("label", "") if t["details"] else ""
        if label and members and not any(is_stranger(m) for m in members):
            labels.append(label)
    return labels[:limit]


__all__ = ["MIN_OWN", "OWN_WEIGHT", "SEARCH_DEPTH", "conversation", "conversations", "is_stranger", "is_users", "own_themes",
           "reflection_input", "speaks_of_user", "speaker", "strangers_allowed", "user_first"]
