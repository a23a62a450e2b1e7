"""The SQL of promotion (plan §4.3): `promotions`, the tier each memory reached or waits for.

With the reads promotion's safety checks make: sightings, tier occupancy and the
coherence axes (§3.9). The approval a promotion may wait for is in
approvals_repository.py.

Every statement is set-based with bound parameters. Times written here are the
caller's `now` (tests fix it); rows the weight choke point writes carry `now` in
their evidence (`evidence->>'at'`), which is what the "already done since …" rules
compare against, so a test with a fixed clock sees its own history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from src.consolidation.deep.supersedes_repository import SUPERSEDED_BY_UPDATE
from src.db.sql import Executor, json_param

# A memory a newer statement updated (sql/153) fades (issue 37 item 5): it is no candidate,
# and its climb, if it was promoted before, stops (`promotions_owed`). An update link lends
# no sightings either way: the newer was said, not derived from the older, so the older's
# retrievals are uses of the earlier fact, not of the newer one (and recall brings the newer
# along with the older, src/recall/current.py: those retrievals would count it twice); the
# newer's own retrievals are its sightings. Nor does what derives from a memory (a merge, an
# insight) take its retrievals after an update superseded it: they are of an earlier fact.
_SIGHTINGS = """
WITH sightings AS (
    SELECT m.id AS memory_id, t AS at
      FROM memories m, unnest(m.access_timestamps) AS t
     WHERE cardinality(m.access_timestamps) > 0
    UNION ALL
    SELECT l.memory_id, l.at
      FROM consolidation_log l
     WHERE l.actor = 'exit_gate' AND l.operation = 'reinforce' AND l.memory_id IS NOT NULL
    UNION ALL
    SELECT s.insight_id, t
      FROM memory_supersedes s JOIN memories src ON src.id = s.source_id
      LEFT JOIN """ + SUPERSEDED_BY_UPDATE + """ sup ON sup.id = src.id,
           unnest(src.access_timestamps) AS t
     WHERE s.via NOT IN ('update', 'correction') AND (sup.at IS NULL OR t < sup.at)
),
counted AS (
    SELECT memory_id, count(*) AS n, min(at) AS first_at, max(at) AS last_at
      FROM sightings WHERE at <= $1
     GROUP BY memory_id HAVING count(*) >= $2 OR memory_id = ANY($4::bigint[])
)
SELECT c.memory_id, c.n, c.first_at, c.last_at, m.depth_weight_alpha AS alpha,
       m.depth_weight_beta AS beta, m.utility_score,
       EXISTS (SELECT 1 FROM promotions p WHERE p.memory_id = c.memory_id AND p.tier = 'goal'
                          AND p.status IN ('applied', 'pending_approval', 'rejected')) AS has_goal,
       EXISTS (SELECT 1 FROM promotions p WHERE p.memory_id = c.memory_id AND p.tier = 'identity'
                          AND p.status IN ('applied', 'pending_approval', 'rejected'))
           AS has_identity
  FROM counted c JOIN memories m ON m.id = c.memory_id
 WHERE NOT m.immutable
   AND NOT EXISTS (SELECT 1 FROM memory_supersedes u WHERE u.source_id = m.id AND u.via IN ('update', 'correction'))
 ORDER BY (c.memory_id = ANY($4::bigint[])) DESC, c.n DESC, c.memory_id
 LIMIT $3 + cardinality($4::bigint[])
"""


async def promotion_candidates(db: Executor, now: datetime, min_sightings: int, limit: int,
                               also: Sequence[int] = ()) -> list[asyncpg.Record]:
    """Memories with at least `min_sightings` sightings up to `now` (see promotion.py), and
    the sightings of the memories `also` names (promotions still climbing) first. None an
    update superseded (`_SIGHTINGS`)."""
    return await db.fetch(_SIGHTINGS, now, min_sightings, limit, list(also))


async def promotions_owed(db: Executor, limit: int, goal_target: float,
                          identity_target: float) -> list[asyncpg.Record]:
    """Applied promotions still climbing to their target; rows from before sql/125 (no
    target of their own) climb to their tier's. A memory an update superseded climbs no
    further (`_SIGHTINGS`): the grant stays, and demotion takes it down (forgetting.py)."""
    return await db.fetch(
        """SELECT p.memory_id, p.tier, p.remaining, p.approval_id, m.depth_weight_alpha AS alpha,
                  m.depth_weight_beta AS beta, m.utility_score,
                  COALESCE(p.target_center, CASE p.tier WHEN 'identity' THEN $3::float8 ELSE $2::float8 END) AS target
             FROM promotions p JOIN memories m ON m.id = p.memory_id
            WHERE p.status = 'applied' AND p.remaining > 0 AND NOT m.immutable
              AND NOT EXISTS (SELECT 1 FROM memory_supersedes u WHERE u.source_id = m.id AND u.via IN ('update', 'correction'))
            ORDER BY p.at LIMIT $1""", limit, goal_target, identity_target)


async def updated_by(db: Executor, memory_id: int) -> int | None:
    """The newest statement that updated `memory_id` (sql/153), or None while it is current."""
    return await db.fetchval(
        """SELECT u.insight_id FROM memory_supersedes u WHERE u.source_id = $1 AND u.via IN ('update', 'correction')
            ORDER BY u.insight_id DESC LIMIT 1""", memory_id)


async def tier_occupancy(db: Executor, goal_center: float, identity_center: float) -> tuple[int, int]:
    """How many memories sit at or above the goal and the identity center (memory_standing's
    center index, sql/141: only the two bands are read)."""
    row = await db.fetchrow(
        """SELECT count(*) FILTER (WHERE center >= $2) AS identity, count(*) AS goal
             FROM memory_standing WHERE center >= $1""", goal_center, identity_center)
    return int(row["goal"]), int(row["identity"])


async def coherence_counts(db: Executor, now: datetime, goal_center: float, identity_center: float,
                           action_days: float = 7.0) -> asyncpg.Record:
    """Inputs of the three CBA axes (plan §3.9) over the promoted ranges, one statement.

    epistemic: informed and contested memories among those at or above the goal center
               (memory_standing's center index, sql/141: the band, not the store);
    value: the summed standard deviation of the identity-range weights and their number;
    action: the mind's own recent output, and the tension memories of that window.
    """
    return await db.fetchrow(
        """WITH w AS (SELECT m.depth_weight_alpha AS a, m.depth_weight_beta AS b
                        FROM memory_standing s JOIN memories m ON m.id = s.id
                       WHERE s.center >= $1)
           SELECT (SELECT count(*) FROM w WHERE NOT (a < 2 AND b < 2)) AS informed,
                  (SELECT count(*) FROM w WHERE a > 5 AND b > 5) AS contested,
                  (SELECT COALESCE(sum(sqrt(a * b / ((a + b) ^ 2 * (a + b + 1)))), 0)
                     FROM w WHERE a / (a + b) >= $2) AS value_std_sum,
                  (SELECT count(*) FROM w WHERE a / (a + b) >= $2) AS values_n,
                  (SELECT count(*) FROM memories WHERE source_tag = 'internal_self'
                      AND created_at > $3::timestamptz - make_interval(secs => $4::float8) AND created_at <= $3) AS actions,
                  (SELECT count(*) FROM memories WHERE memory_type = 'tension'
                      AND created_at > $3::timestamptz - make_interval(secs => $4::float8) AND created_at <= $3
                      AND COALESCE(metadata->>'resolved', 'false') <> 'true') AS tensions""",
        goal_center, identity_center, now, action_days * 86400.0)


@dataclass(frozen=True)
class PromotionRecord:
    """One (memory, tier) promotion row as written: its status and why, what is still owed, its target."""

    memory_id: int
    tier: str
    status: str
    at: datetime
    reason: str
    remaining: float = 0.0
    approval_id: int | None = None
    evidence: Mapping[str, Any] | None = None
    target: float | None = None


async def record_promotion(conn: asyncpg.Connection, row: PromotionRecord) -> None:
    """Insert or update the (memory, tier) promotion row; an update keeps the earlier approval
    and target when `row` has none, and merges the evidence."""
    await conn.execute(
        """INSERT INTO promotions (memory_id, tier, status, at, approval_id, reason, remaining, evidence,
                                   target_center)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9)
           ON CONFLICT (memory_id, tier) DO UPDATE
              SET status = EXCLUDED.status, at = EXCLUDED.at,
                  approval_id = COALESCE(EXCLUDED.approval_id, promotions.approval_id),
                  reason = EXCLUDED.reason, remaining = EXCLUDED.remaining,
                  evidence = promotions.evidence || EXCLUDED.evidence,
                  target_center = COALESCE(EXCLUDED.target_center, promotions.target_center)""",
        row.memory_id, row.tier, row.status, row.at, row.approval_id, row.reason, row.remaining,
        json_param(dict(row.evidence or {})), row.target)


async def note_stalled_step(conn: asyncpg.Connection, memory_id: int, tier: str, reason: str,
                            evidence: Mapping[str, Any]) -> None:
    """A climbing promotion's step did not apply this pass: say why, keep the grant (status,
    time and what is owed stay, so demotion still sees when it last moved)."""
    await conn.execute(
        """UPDATE promotions SET reason = $3, evidence = evidence || $4::jsonb
            WHERE memory_id = $1 AND tier = $2""", memory_id, tier, reason, json_param(dict(evidence)))
