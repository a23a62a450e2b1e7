"""why_do_i_believe (plan §4.2): walk supersedes links back to the original experiences.

A memory the deep pass derived from a DMN association or identity signal (plan §4.7;
src/consolidation/deep/dmn_inputs.py) also names that item: the idle thought it came from.

Each memory says when it was said (issue 37 item 1, src/recall/dated.py) when the caller
gives its `now`. An update link (sql/153_update_links.sql: the newer statement supersedes the
older, kept and marked earlier) is no derivation: the chain names it in words ("earlier
statement: updated by #40 3 months later"), and a memory a newer statement has updated
since says so under its line, whether or not the newer one is in the chain.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from src.consolidation.deep import supersedes_repository
from src.dmn import repository as dmn_repository
from src.recall.dated import said_words
from src.recall.when import ago, memory_time, said_when
from src.terminal import escape
from src.text import clean_text, excerpt

PREVIEW_CHARS = 160
#: memory_supersedes.via of a newer statement that updates an older one (sql/153).
UPDATE = "update"
#: ... and of the guardian's correction of a memory (sql/156, src/erasure/correct.py).
CORRECTION = "correction"
#: The links that make a memory earlier, with what the parent did to it.
REPLACED = {UPDATE: "updated", CORRECTION: "corrected"}

#: When each memory in the chain happened, where it has its own date (an imported
#: conversation), and the newer statements that updated it, with their dates. The chain's
#: own statement (supersedes_repository.supersedes_chain) reads neither.
_DATES_SQL = """
SELECT m.id, m.event_time,
       COALESCE(array_agg(n.id ORDER BY n.id) FILTER (WHERE n.id IS NOT NULL), '{}') AS newer_ids,
       COALESCE(array_agg(COALESCE(n.event_time, n.created_at) ORDER BY n.id) FILTER (WHERE n.id IS NOT NULL),
                '{}') AS newer_at
  FROM memories m
  LEFT JOIN memory_supersedes s ON s.source_id = m.id AND s.via IN ('update', 'correction')
  LEFT JOIN memories n ON n.id = s.insight_id
 WHERE m.id = ANY($1::bigint[])
 GROUP BY m.id, m.event_time
"""


@dataclass(frozen=True)
class DmnOrigin:
    """The DMN item a derived memory came from."""

    item_id: int
    channel: str                 # creative | identity
    at: datetime
    text: str

    @property
    def kind(self) -> str:
        return "creative association" if self.channel == "creative" else f"{self.channel} signal"


@dataclass(frozen=True)
class ChainLink:
    """One memory in the chain; depth 0 is the belief asked about."""

    memory_id: int
    parent_id: int | None
    via: str | None
    depth: int
    memory_type: str
    content: str
    created_at: datetime
    alpha: float
    beta: float
    dmn: DmnOrigin | None = None
    event_time: datetime | None = None        # its own date (an imported conversation), if any
    updated_by: tuple[tuple[int, datetime], ...] = ()   # newer statements that update it: (id, said at)

    @property
    def center(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    @property
    def said_at(self) -> datetime:
        """When it was said: its event time, else when it was stored (src/recall/when.py)."""
        return memory_time(self.event_time, self.created_at) or self.created_at


async def why_do_i_believe(db: asyncpg.Pool | asyncpg.Connection, memory_id: int) -> list[ChainLink]:
    """The memory and, depth-first, everything it was consolidated from. [] if it does not exist."""
    rows = await supersedes_repository.supersedes_chain(db, memory_id)
    if not rows:
        return []
    ids = [r["id"] for r in rows]
    origins = await dmn_repository.origins(db, ids)
    dates = {d["id"]: (d["event_time"], tuple(zip(d["newer_ids"], d["newer_at"], strict=True)))
             for d in await db.fetch(_DATES_SQL, ids)}
    return [ChainLink(r["id"], r["parent"], r["via"], r["depth"], r["memory_type"], r["content"],
                      r["created_at"], r["alpha"], r["beta"], _origin(origins.get(r["id"])),
                      *dates.get(r["id"], (None, ()))) for r in rows]


def _origin(row) -> DmnOrigin | None:
    return None if row is None else DmnOrigin(row["id"], row["channel"], row["at"], row["text"])


def _safe(text: str) -> str:
    """One line, control characters escaped (operator-facing)."""
    return escape(excerpt(clean_text(text).text, PREVIEW_CHARS))


def later(older: datetime, newer: datetime) -> str:
    """How long after `older` `newer` was said ("3 months later", "the same day"); "" when
    `newer` is dated before it (an imported conversation's own date can be)."""
    words = ago(older, newer)
    if words == "today":
        return "the same day"
    if words == "yesterday":
        return "a day later"
    return words.removesuffix(" ago") + " later" if words.endswith(" ago") else ""


def _how(link: ChainLink, said: dict[int, datetime]) -> str:
    """What the link to its parent is: "<- merge", or an update in words."""
    if link.via not in REPLACED or link.parent_id is None:
        return f" <- {link.via}" if link.via else ""
    gap = later(link.said_at, said[link.parent_id]) if link.parent_id in said else ""
    return f", earlier statement: {REPLACED[link.via]} by #{link.parent_id}" + (f" {gap}" if gap else "")


def _when(link: ChainLink, now: datetime | None) -> str:
    """"said Wed 25 Nov 2026, 3 days ago;" with `now`, else the time alone ("2026-11-25 14:05")."""
    if now is None:
        return f"{link.said_at:%Y-%m-%d %H:%M}"
    return f"said {said_words(link.event_time, link.created_at, now)};"


def _at(at: datetime, now: datetime | None) -> str:
    return f"{at:%Y-%m-%d %H:%M}" if now is None else said_when(at, now)


def _updated_since(link: ChainLink, now: datetime | None) -> list[str]:
    """A line for each newer statement that updated this memory, but the chain's own parent
    (its line already says so)."""
    lines = []
    for newer, at in link.updated_by:
        if newer != link.parent_id:
            gap = later(link.said_at, at)
            lines.append(f"{'  ' * (link.depth + 1)}updated by #{newer}" + (f", said {gap}" if gap else "")
                         + f" ({_at(at, now)})")
    return lines


def format_chain(memory_id: int, chain: list[ChainLink], *, now: datetime | None = None) -> str:
    """The chain as indented lines with dates and weights. With `now` (the caller's clock)
    each date is in words, absolute and relative; without it, the time alone."""
    if not chain:
        return f"no memory #{memory_id}"
    said = {link.memory_id: link.said_at for link in chain}
    lines = []
    for link in chain:
        pad = "  " * link.depth
        lines.append(f"{pad}#{link.memory_id} [{link.memory_type}{_how(link, said)}] "
                     f"{_when(link, now)} center {link.center:.2f} "
                     f"(Beta {link.alpha:.2f}, {link.beta:.2f}) {_safe(link.content)}")
        if link.dmn is not None:
            lines.append(f"{pad}  from DMN {link.dmn.kind} #{link.dmn.item_id} ({_at(link.dmn.at, now)}): "
                         f"{_safe(link.dmn.text)}")
        lines += _updated_since(link, now)
    if all(link.via in REPLACED for link in chain if link.depth == 1):
        lines.append("  (an original experience: nothing was consolidated into it)")
    return "\n".join(lines)
