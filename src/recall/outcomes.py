"""Recall outcomes (plan §4.3, §4.5, §5.3): what recall returned, and whether it was used.

Mutation (`mutation.py`) writes one `recall_outcomes` row per returned memory with each
relevance component's contribution; consolidation's evolution step later scores the rows
whose window has passed and prunes the old ones. The table lives here, with the code that
writes it, so recall never imports consolidation: consolidation reads and scores it through
these functions. (Not the §5.3 outcomes of src/outcomes/: those are what the mind's
decisions came to.)

Used comes from outside recall (issue 25). Recall records its own accesses, so "accessed
again" rewarded whatever was recalled often. A recalled memory is *used* when:
  - the answer of that same cycle drew on it, or the user's message of that cycle said it
    again (a `reflected` or `restated` row of `memory_uses` at the recall's own time:
    src/outcomes/use.py states the measure), or
  - within the window after the recall, the user or the guardian said something about it:
    /good, /bad, plain feedback on an answer that drew on it (`memory_uses`), or a user's
    line the exit gate found to confirm it (reinforce) or to contradict it (persist_flag
    with it as the nearest memory).
Each scored row also says whether any of that evidence was negative (`wrong`: /bad, a
correction, a contradiction): utility's reward (src/consolidation/evolution/utility.py).

Times are the caller's `now` (tests fix it).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from src.db.sql import Executor


async def insert_recall_outcomes(conn: Executor, at: datetime, memory_ids: Sequence[int],
                                 contributions: Sequence[Sequence[float]]) -> None:
    """What recall returned (rank = position) and each component's contribution."""
    if not memory_ids:
        return
    await conn.execute(
        """INSERT INTO recall_outcomes (at, memory_id, rank, contributions)
           SELECT $1, m, r, string_to_array(c, ',')::float8[]
             FROM unnest($2::bigint[], $3::int[], $4::text[]) AS t(m, r, c)""",
        at, list(memory_ids), list(range(1, len(memory_ids) + 1)),
        [",".join(repr(float(x)) for x in c) for c in contributions])


# Evidence per due outcome, set-based: the evidence of the span (uses, the user's exit-gate
# lines) is read once and hash-joined to the due outcomes by memory, not looked up per outcome.
_SCORE = """
WITH due AS (
    SELECT id, at, memory_id FROM recall_outcomes
     WHERE scored_at IS NULL AND at <= $1::timestamptz - make_interval(secs => $2::float8)
     ORDER BY at, id LIMIT $3 FOR UPDATE SKIP LOCKED),
span AS (SELECT min(at) AS lo, max(at) + make_interval(secs => $2::float8) AS hi FROM due),
seen AS (
    SELECT u.memory_id, u.at, u.kind IN ('reflected', 'restated') AS same_cycle, u.valence
      FROM memory_uses u, span WHERE u.at >= span.lo AND u.at <= span.hi
    UNION ALL
    SELECT CASE WHEN g.action = 'reinforce' THEN g.memory_id ELSE g.nearest_memory_id END,
           g.at, false, CASE WHEN g.action = 'reinforce' THEN 1.0 ELSE -1.0 END
      FROM gate_decisions g, span
     WHERE g.gate = 'exit' AND g.source_tag = 'external_user' AND g.action IN ('reinforce', 'persist_flag')
       AND g.at > span.lo AND g.at <= span.hi),
evidence AS (
    SELECT d.id, bool_or(e.valence < 0) AS wrong
      FROM due d JOIN seen e ON e.memory_id = d.memory_id
     WHERE (e.same_cycle AND e.at = d.at)
        OR (NOT e.same_cycle AND e.at >= d.at AND e.at <= d.at + make_interval(secs => $2::float8))
     GROUP BY d.id)
UPDATE recall_outcomes o
   SET scored_at = $1, used = e.id IS NOT NULL, wrong = COALESCE(e.wrong, false)
  FROM due d LEFT JOIN evidence e ON e.id = d.id
 WHERE o.id = d.id
RETURNING o.memory_id, o.used, o.wrong, o.contributions
"""


async def score_outcomes(conn: asyncpg.Connection, now: datetime, window_days: float,
                         limit: int) -> list[asyncpg.Record]:
    """Score recall outcomes whose window has passed (see the module docstring): each row's
    `memory_id`, `used`, `wrong` and `contributions`."""
    return await conn.fetch(_SCORE, now, window_days * 86400.0, limit)


async def prune_outcomes(conn: Executor, now: datetime, keep_days: float) -> int:
    """Scored outcomes older than `keep_days` have done their work: delete them, and the
    evidence of use of that age that nothing reads any more (reflected and restated rows,
    and feedback already folded into utility)."""
    status = await conn.execute(
        "DELETE FROM recall_outcomes WHERE scored_at IS NOT NULL AND at < $1::timestamptz - make_interval(secs => $2::float8)",
        now, keep_days * 86400.0)
    await conn.execute(
        """DELETE FROM memory_uses WHERE at < $1::timestamptz - make_interval(secs => $2::float8)
              AND (valence = 0 OR folded)""", now, keep_days * 86400.0)
    return int(status.split()[-1])
