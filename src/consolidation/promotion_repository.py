"""The SQL of tier movement (plan §4.3, §4.4): promotion, the approval queue, decay and demotion.

Every statement is set-based with bound parameters. Times written here are the
caller's `now` (tests fix it); rows the weight choke point writes carry `now` in
their evidence (`evidence->>'at'`), which is what the "already done since …" rules
compare against, so a test with a fixed clock sees its own history.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import asyncpg

from src.db.sql import Executor, json_param

# --------------------------------------------------------------------------- promotion
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
      FROM memory_supersedes s JOIN memories src ON src.id = s.source_id, unnest(src.access_timestamps) AS t
),
counted AS (
    SELECT memory_id, count(*) AS n, min(at) AS first_at, max(at) AS last_at
      FROM sightings WHERE at <= $1
     GROUP BY memory_id HAVING count(*) >= $2
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
 ORDER BY c.n DESC, c.memory_id
 LIMIT $3
"""


async def promotion_candidates(db: Executor, now: datetime, min_sightings: int, limit: int) -> list[asyncpg.Record]:
    """Memories with at least `min_sightings` sightings up to `now` (see promotion.py)."""
    return await db.fetch(_SIGHTINGS, now, min_sightings, limit)


async def promotions_owed(db: Executor, limit: int) -> list[asyncpg.Record]:
    """Applied promotions whose reinforcement has not fully arrived yet (rate limit)."""
    return await db.fetch(
        """SELECT p.memory_id, p.tier, p.remaining, m.depth_weight_alpha AS alpha,
                  m.depth_weight_beta AS beta, m.utility_score
             FROM promotions p JOIN memories m ON m.id = p.memory_id
            WHERE p.status = 'applied' AND p.remaining > 0 AND NOT m.immutable
            ORDER BY p.at LIMIT $1""", limit)


async def tier_occupancy(db: Executor, goal_center: float, identity_center: float) -> tuple[int, int]:
    """How many memories sit at or above the goal and the identity center (one scan)."""
    row = await db.fetchrow(
        """SELECT count(*) FILTER (WHERE c >= $1) AS goal, count(*) FILTER (WHERE c >= $2) AS identity
             FROM (SELECT depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) AS c
                     FROM memories) AS w""", goal_center, identity_center)
    return int(row["goal"]), int(row["identity"])


async def coherence_counts(db: Executor, now: datetime, goal_center: float, identity_center: float,
                           action_days: float = 7.0) -> asyncpg.Record:
    """Inputs of the three CBA axes (plan §3.9) over the promoted ranges, one statement.

    epistemic: informed and contested memories among those at or above the goal center;
    value: the summed standard deviation of the identity-range weights and their number;
    action: the mind's own recent output, and the tension memories of that window.
    """
    return await db.fetchrow(
        """WITH w AS (SELECT depth_weight_alpha AS a, depth_weight_beta AS b
                        FROM memories
                       WHERE depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) >= $1)
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


async def record_promotion(conn: asyncpg.Connection, memory_id: int, tier: str, status: str, at: datetime,
                           reason: str, *, remaining: float = 0.0, approval_id: int | None = None,
                           evidence: Mapping[str, Any] | None = None) -> None:
    """Insert or update the (memory, tier) promotion row."""
    await conn.execute(
        """INSERT INTO promotions (memory_id, tier, status, at, approval_id, reason, remaining, evidence)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb)
           ON CONFLICT (memory_id, tier) DO UPDATE
              SET status = EXCLUDED.status, at = EXCLUDED.at,
                  approval_id = COALESCE(EXCLUDED.approval_id, promotions.approval_id),
                  reason = EXCLUDED.reason, remaining = EXCLUDED.remaining,
                  evidence = promotions.evidence || EXCLUDED.evidence""",
        memory_id, tier, status, at, approval_id, reason, remaining, json_param(dict(evidence or {})))


# --------------------------------------------------------------------------- approvals
async def insert_approval(conn: Executor, kind: str, payload: Mapping[str, Any], reason: str,
                          now: datetime) -> int:
    return await conn.fetchval(
        "INSERT INTO approvals (kind, payload, reason, created_at) VALUES ($1, $2::jsonb, $3, $4) RETURNING id",
        kind, json_param(dict(payload)), reason, now)


async def pending_approvals(db: Executor, limit: int = 50) -> list[asyncpg.Record]:
    return await db.fetch(
        """SELECT id, kind, payload, reason, created_at FROM approvals
            WHERE status = 'pending' ORDER BY created_at, id LIMIT $1""", limit)


async def lock_approval(conn: asyncpg.Connection, approval_id: int) -> asyncpg.Record | None:
    # NO KEY: the apply function writes rows that reference this one (FOR KEY SHARE)
    # from another connection while this lock is held.
    return await conn.fetchrow(
        "SELECT id, kind, payload, reason, status, decision FROM approvals WHERE id = $1 FOR NO KEY UPDATE",
        approval_id)


async def decide_approval(conn: asyncpg.Connection, approval_id: int, status: str, decision: str,
                          now: datetime) -> None:
    await conn.execute(
        "UPDATE approvals SET status = $2, decision = $3, decided_at = $4 WHERE id = $1",
        approval_id, status, decision, now)


# --------------------------------------------------------------------------- decay, demotion
async def decay_candidates(db: Executor, now: datetime, idle_days: float, max_access_count: int,
                           limit: int) -> list[asyncpg.Record]:
    """§4.4: not accessed for `idle_days`, fewer than `max_access_count` accesses, not yet
    decayed since its last access.

    Idle is measured on the mind's clock: since the last access, or since the mind stored
    the memory (`created_at`) — never since the `event_time` the content is about. An
    imported year-old conversation was learned today; it is not a year unused.
    """
    return await db.fetch(
        """SELECT m.id, m.depth_weight_alpha AS alpha, m.depth_weight_beta AS beta,
                  COALESCE(m.last_accessed, m.created_at) AS last_seen, m.access_count
             FROM memories m
            WHERE NOT m.immutable AND m.access_count < $3
              AND COALESCE(m.last_accessed, m.created_at) < $1::timestamptz - make_interval(secs => $2::float8)
              AND NOT EXISTS (SELECT 1 FROM consolidation_log l
                               WHERE l.memory_id = m.id AND l.actor = 'decay' AND l.evidence ? 'at'
                                 AND (l.evidence->>'at')::timestamptz
                                     >= COALESCE(m.last_accessed, m.created_at))
            ORDER BY m.id LIMIT $4""",
        now, idle_days * 86400.0, max_access_count, limit)


async def demotion_candidates(db: Executor, now: datetime, *, min_center: float, goal_center: float,
                              idle_days: float, every_days: float, limit: int) -> list[asyncpg.Record]:
    """§4.3 demotion: promoted or goal-range memories no longer reinforced.

    Last reinforcement = the latest of their last access, their promotion and any
    reinforcement in the audit log; demoted at most once per `every_days`.
    """
    return await db.fetch(
        """WITH w AS (
               SELECT m.id, m.depth_weight_alpha AS alpha, m.depth_weight_beta AS beta,
                      GREATEST(COALESCE(m.last_accessed, m.created_at), m.created_at,
                               (SELECT max(p.at) FROM promotions p
                                 WHERE p.memory_id = m.id AND p.status = 'applied'),
                               (SELECT max((l.evidence->>'at')::timestamptz) FROM consolidation_log l
                                 WHERE l.memory_id = m.id AND l.operation = 'reinforce'
                                   AND l.evidence ? 'at')) AS last_reinforced
                 FROM memories m
                WHERE NOT m.immutable
                  AND m.depth_weight_alpha / (m.depth_weight_alpha + m.depth_weight_beta) > $2
                  AND (m.depth_weight_alpha / (m.depth_weight_alpha + m.depth_weight_beta) >= $3
                       OR EXISTS (SELECT 1 FROM promotions p WHERE p.memory_id = m.id AND p.status = 'applied')))
           SELECT w.* FROM w
            WHERE w.last_reinforced < $1::timestamptz - make_interval(secs => $4::float8)
              AND NOT EXISTS (SELECT 1 FROM consolidation_log l
                               WHERE l.memory_id = w.id AND l.actor = 'demotion' AND l.evidence ? 'at'
                                 AND (l.evidence->>'at')::timestamptz > $1::timestamptz - make_interval(secs => $5::float8))
            ORDER BY w.id LIMIT $6""",
        now, min_center, goal_center, idle_days * 86400.0, every_days * 86400.0, limit)
