"""The SQL of the light decay nudge (plan §4.1): `memory_decay_marks`.

A side table, not a column of `memories`, so marking a memory decayed costs no
non-HOT update of the memory row. The nudge itself goes through the weight choke point;
`centers` are the weights it starts from (Phase B's per-cycle baseline).

A memory a newer statement updated (sql/153) is unused since the update whatever recall
did with it after (issue 37 item 5): recall brings it along with its successor
(src/recall/current.py), which keeps an earlier fact in view, not in use. The walk over
the last-seen index does not meet such a memory while recall keeps it fresh;
`superseded_due` finds those.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from src.consolidation.deep.supersedes_repository import SUPERSEDED_BY_UPDATE
from src.db.sql import Executor

DECAY_PAGE = """
SELECT p.id, p.last_seen, (d.decayed_at IS NULL OR d.decayed_at < $2) AS due
  FROM (SELECT s.id, s.last_seen FROM memory_standing s
         WHERE NOT s.immutable AND s.last_seen < $1
           AND ($3::timestamptz IS NULL OR (s.last_seen, s.id) > ($3::timestamptz, $4::bigint))
         ORDER BY s.last_seen, s.id LIMIT $5) p
  LEFT JOIN memory_decay_marks d ON d.memory_id = p.id
 ORDER BY p.last_seen, p.id"""


@dataclass(frozen=True)
class DecayWalk:
    """Where the longest-unused walk stands: the (last_seen, id) of the last row it looked at."""

    last_seen: datetime | None = None
    memory_id: int = 0


async def decay_candidates(conn: Executor, unused_before: datetime, decayed_before: datetime, limit: int,
                           walk: DecayWalk, page: int) -> tuple[list[int], DecayWalk]:
    """Unused memories due for their decay nudge, longest unused first, and the walk's next place.

    One page of at most `page` rows of memory_standing's last-seen index (sql/141), from
    where the last call stopped: memories nudged within the period are skipped without
    re-reading the whole idle store every tick. At the end of the idle range the walk
    starts over (DecayWalk())."""
    rows = await conn.fetch(DECAY_PAGE, unused_before, decayed_before, walk.last_seen, walk.memory_id, page)
    due = [r for r in rows if r["due"]][:limit]
    if len(due) == limit:                  # the batch is full: go on right after its last row
        after = DecayWalk(due[-1]["last_seen"], due[-1]["id"])
    elif len(rows) == page:                # a full page with room left: go on after the page
        after = DecayWalk(rows[-1]["last_seen"], rows[-1]["id"])
    else:                                  # the end of the idle range: start over next time
        after = DecayWalk()
    return [r["id"] for r in due], after


#: Superseded memories the walk does not meet (last seen after `$1`) whose update is older
#: than `$1`, due for their nudge; the longest superseded first.
SUPERSEDED_DUE = """
SELECT s.id
  FROM memory_standing s JOIN """ + SUPERSEDED_BY_UPDATE + """ sup ON sup.id = s.id
  LEFT JOIN memory_decay_marks d ON d.memory_id = s.id
 WHERE NOT s.immutable AND s.last_seen >= $1 AND sup.at < $1
   AND (d.decayed_at IS NULL OR d.decayed_at < $2)
 ORDER BY sup.at, s.id LIMIT $3"""


async def superseded_due(conn: Executor, unused_before: datetime, decayed_before: datetime,
                         limit: int) -> list[int]:
    """Memories an update superseded before `unused_before` that recall kept fresh since, due
    for their nudge (not nudged since `decayed_before`); at most `limit`."""
    if limit <= 0:
        return []
    return [r["id"] for r in await conn.fetch(SUPERSEDED_DUE, unused_before, decayed_before, limit)]


async def mark_decayed(conn: Executor, ids: Sequence[int], at: datetime) -> None:
    await conn.execute(
        """INSERT INTO memory_decay_marks (memory_id, decayed_at) SELECT unnest($1::bigint[]), $2
           ON CONFLICT (memory_id) DO UPDATE SET decayed_at = EXCLUDED.decayed_at""", list(ids), at)


async def centers(conn: Executor, ids: Sequence[int]) -> dict[int, float]:
    rows = await conn.fetch(
        """SELECT id, depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) AS c
             FROM memories WHERE id = ANY($1::bigint[])""", list(ids))
    return {r["id"]: r["c"] for r in rows}
