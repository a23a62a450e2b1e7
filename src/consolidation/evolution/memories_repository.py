"""The SQL of the memories the evolution phases select, and the column they write.

Decay and demotion candidates (plan §4.3, §4.4; the changes themselves go through the
weight choke point), Beta weights gone pathological (Phase C observation, §4.5), and
`utility_score`, the one column written here (Q-value utility, §4.3; see utility.py).

Every statement is set-based with bound parameters. Times written here are the
caller's `now` (tests fix it); rows the weight choke point writes carry `now` in
their evidence (`evidence->>'at'`), which is what the "already done since …" rules
compare against, so a test with a fixed clock sees its own history.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from src.consolidation.deep.supersedes_repository import SUPERSEDED_BY_UPDATE
from src.db.sql import Executor

#: When memory `m` was last used, on the mind's clock: its last access, else when it was
#: stored. For a memory a newer statement updated (`sup`, SUPERSEDED_BY_UPDATE) no later
#: than the update (not before it was stored): recall brings it along with its successor
#: (src/recall/current.py), which keeps an earlier fact in view, not in use (issue 37 item 5).
_LAST_USED = """CASE WHEN sup.at IS NULL THEN COALESCE(m.last_accessed, m.created_at)
                 ELSE LEAST(COALESCE(m.last_accessed, m.created_at), GREATEST(sup.at, m.created_at)) END"""


async def decay_candidates(db: Executor, now: datetime, idle_days: float, max_access_count: int,
                           limit: int) -> list[asyncpg.Record]:
    """§4.4: not accessed for `idle_days`, fewer than `max_access_count` accesses, not yet
    decayed since its last access.

    Idle is measured on the mind's clock: since the last access, or since the mind stored
    the memory (`created_at`) — never since the `event_time` the content is about. An
    imported year-old conversation was learned today; it is not a year unused.

    A memory a newer statement updated (sql/153) fades like an unused one (issue 37 item
    5): idle since the update at the latest (`_LAST_USED`), and its access count does not
    hold it (those were uses of a fact since replaced). `superseded_at` says when, None
    for a current memory; the newer one is measured like any other.
    """
    return await db.fetch(
        """SELECT * FROM (
               SELECT m.id, m.depth_weight_alpha AS alpha, m.depth_weight_beta AS beta,
                      """ + _LAST_USED + """ AS last_seen, m.access_count, sup.at AS superseded_at
                 FROM memories m LEFT JOIN """ + SUPERSEDED_BY_UPDATE + """ sup ON sup.id = m.id
                WHERE NOT m.immutable AND (m.access_count < $3 OR sup.at IS NOT NULL)) c
            WHERE c.last_seen < $1::timestamptz - make_interval(secs => $2::float8)
              AND NOT EXISTS (SELECT 1 FROM consolidation_log l
                               WHERE l.memory_id = c.id AND l.actor = 'decay' AND l.evidence ? 'at'
                                 AND (l.evidence->>'at')::timestamptz >= c.last_seen)
            ORDER BY c.id LIMIT $4""",
        now, idle_days * 86400.0, max_access_count, limit)


async def demotion_candidates(db: Executor, now: datetime, *, min_center: float, goal_center: float,
                              idle_days: float, every_days: float, limit: int) -> list[asyncpg.Record]:
    """§4.3 demotion: promoted or goal-range memories no longer reinforced, least useful first.

    Last reinforcement = the latest of their last use (`_LAST_USED`: for a memory a newer
    statement updated, no later than the update), their promotion and any reinforcement
    in the audit log; demoted at most once per `every_days`, and a demotion
    the Two-Gate guardrail refused (an enforced `two_gate` event of actor demotion) is not
    tried again within `every_days` either.
    """
    return await db.fetch(
        """WITH w AS (
               SELECT m.id, m.depth_weight_alpha AS alpha, m.depth_weight_beta AS beta, m.utility_score,
                      GREATEST(""" + _LAST_USED + """, m.created_at,
                               (SELECT max(p.at) FROM promotions p
                                 WHERE p.memory_id = m.id AND p.status = 'applied'),
                               (SELECT max((l.evidence->>'at')::timestamptz) FROM consolidation_log l
                                 WHERE l.memory_id = m.id AND l.operation = 'reinforce'
                                   AND l.evidence ? 'at')) AS last_reinforced
                 FROM memories m LEFT JOIN """ + SUPERSEDED_BY_UPDATE + """ sup ON sup.id = m.id
                WHERE NOT m.immutable
                  AND m.depth_weight_alpha / (m.depth_weight_alpha + m.depth_weight_beta) > $2
                  AND (m.depth_weight_alpha / (m.depth_weight_alpha + m.depth_weight_beta) >= $3
                       OR EXISTS (SELECT 1 FROM promotions p WHERE p.memory_id = m.id AND p.status = 'applied')))
           SELECT w.* FROM w
            WHERE w.last_reinforced < $1::timestamptz - make_interval(secs => $4::float8)
              AND NOT EXISTS (SELECT 1 FROM consolidation_log l
                               WHERE l.memory_id = w.id AND l.actor = 'demotion' AND l.evidence ? 'at'
                                 AND (l.evidence->>'at')::timestamptz > $1::timestamptz - make_interval(secs => $5::float8))
              AND NOT EXISTS (SELECT 1 FROM safety_events e
                               WHERE e.memory_id = w.id AND e.ceiling = 'two_gate' AND e.enforced
                                 AND e.action->>'actor' = 'demotion' AND e.action ? 'at'
                                 AND (e.action->>'at')::timestamptz > $1::timestamptz - make_interval(secs => $5::float8))
            ORDER BY w.utility_score, w.id LIMIT $6""",
        now, min_center, goal_center, idle_days * 86400.0, every_days * 86400.0, limit)


async def update_utility(conn: Executor, memory_ids: Sequence[int], steps: Sequence[float],
                         mean_rewards: Sequence[float]) -> None:
    """Q <- Q + step * (mean_reward - Q) per memory, one statement (see utility.py)."""
    if not memory_ids:
        return
    await conn.execute(
        """UPDATE memories m SET utility_score = m.utility_score + u.step * (u.r - m.utility_score)
             FROM unnest($1::bigint[], $2::float8[], $3::float8[]) AS u(id, step, r)
            WHERE m.id = u.id""", list(memory_ids), list(steps), list(mean_rewards))


async def pathological_weights(db: Executor, limit_evidence: float, limit: int = 20) -> tuple[int, list[asyncpg.Record]]:
    """Memories whose alpha or beta exploded past `limit_evidence`: count and the worst few."""
    rows = await db.fetch(
        """SELECT id, depth_weight_alpha AS alpha, depth_weight_beta AS beta, count(*) OVER () AS total
             FROM memories WHERE depth_weight_alpha > $1 OR depth_weight_beta > $1
            ORDER BY depth_weight_alpha + depth_weight_beta DESC LIMIT $2""", limit_evidence, limit)
    return (int(rows[0]["total"]) if rows else 0), rows
