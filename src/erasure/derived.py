"""The memories built from a forgotten one (issue 39 item 2): re-derived without it, or removed.

Consolidation derives memories from others and links them (`memory_supersedes`, via
'merge', 'insight' or 'narrative'; src/consolidation/deep/derived.py). A derived memory
states its sources' words, so forgetting a source must reach it, and what was derived
from it in turn:

- a merge keeps the distinct facts of its members (the extractive merge,
  src/consolidation/deep/merge.py): with two or more members left it is written again
  from them — the extractive merge without the forgotten source, whatever wrote it first —
  and with fewer it is removed (one member is its own memory again);
- an insight, a narrative or a tension is a model's reading of its evidence: no offline
  step can say what it would read without the forgotten part, so it is removed, and the
  evidence left is free to be consolidated again by the next deep pass (its links go with
  the removed memory; a merge's members become merge candidates again);
- a re-derived merge is a changed source too: what was derived from it is handled again,
  to the end of the chain (`plan` walks it breadth-first, one query a level).

Links via 'update' or 'correction' are no derivation (a newer statement, or the guardian's
correction, was said, not built): the newer memory stays when the older is forgotten.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from src.consolidation.clustering import most_central
from src.consolidation.deep.merge import extractive_merge
from src.db.sql import Executor

#: The links that mean "built from" (sql/030); an update or correction link is not one.
DERIVED_VIA = ("insight", "merge", "narrative")
#: A chain of derivations is at most this deep (merge → narrative → reconsolidated …).
MAX_DEPTH = 20

_DERIVED = """
SELECT d.id, d.memory_type, s.via,
       array_agg(s2.source_id ORDER BY s2.source_id) FILTER (WHERE s2.source_id IS NOT NULL) AS sources
  FROM memory_supersedes s
  JOIN memories d ON d.id = s.insight_id
  LEFT JOIN memory_supersedes s2 ON s2.insight_id = d.id AND s2.via = s.via
 WHERE s.source_id = ANY($1::bigint[]) AND s.via = ANY($2::text[]) AND NOT d.id = ANY($3::bigint[])
 GROUP BY d.id, d.memory_type, s.via
"""
_SOURCES = "SELECT id, content, embedding FROM memories WHERE id = ANY($1::bigint[]) ORDER BY id"


@dataclass(frozen=True)
class Rewrite:
    """A merge written again from the members left."""

    id: int
    content: str
    sources: list[int]


@dataclass
class Plan:
    """What forgetting `chosen` takes: every memory removed (the chosen first) and the merges
    written again."""

    chosen: list[int]
    removed: list[int] = field(default_factory=list)
    rewrites: list[Rewrite] = field(default_factory=list)

    @property
    def derived_removed(self) -> list[int]:
        return [i for i in self.removed if i not in set(self.chosen)]


async def plan(db: Executor, chosen: Sequence[int]) -> Plan:
    """Walk the derivations of `chosen` (see the module docstring); nothing is written."""
    out = Plan(sorted(set(chosen)), removed=sorted(set(chosen)))
    gone: set[int] = set(out.removed)
    frontier = list(out.removed)
    handled: set[int] = set(gone)
    for _ in range(MAX_DEPTH):
        if not frontier:
            break
        rows = await db.fetch(_DERIVED, frontier, list(DERIVED_VIA), sorted(handled))
        frontier = []
        for r in rows:
            d = r["id"]
            if d in handled:
                continue
            handled.add(d)
            left = [s for s in (r["sources"] or []) if s not in gone]
            rewrite = await _rewrite(db, d, left) if r["via"] == "merge" and len(left) >= 2 else None
            if rewrite is None:
                gone.add(d)
                out.removed.append(d)
            else:
                out.rewrites.append(rewrite)
            frontier.append(d)
    return out


async def _rewrite(db: Executor, merge_id: int, left: Sequence[int]) -> Rewrite | None:
    """The merge's text from the members left (the extractive merge: the most central
    member, then the others' new clauses); None when nothing is left to state."""
    rows = await db.fetch(_SOURCES, list(left))
    if len(rows) < 2:
        return None
    texts = [r["content"] for r in rows]
    vectors = [r["embedding"] for r in rows]
    central = (most_central(np.vstack([v.to_numpy() for v in vectors]).astype(np.float32))
               if all(v is not None for v in vectors) else 0)
    extract = extractive_merge(texts, central)
    if not extract.text.strip():
        return None
    return Rewrite(merge_id, extract.text, [rows[i]["id"] for i in extract.held])
