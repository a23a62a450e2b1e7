"""The SQL of recall outcomes, utility and the Dirichlet evolution (plan §4.3, §4.5).

Every statement is set-based with bound parameters. Times written here are the
caller's `now` (tests fix it); rows the weight choke point writes carry `now` in
their evidence (`evidence->>'at'`), which is what the "already done since …" rules
compare against, so a test with a fixed clock sees its own history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import asyncpg

from src.db.sql import Executor, json_param


# --------------------------------------------------------------------------- outcomes, utility, Dirichlet
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


async def score_outcomes(conn: asyncpg.Connection, now: datetime, window_days: float,
                         limit: int) -> list[asyncpg.Record]:
    """Score recall outcomes whose window has passed: used = accessed again within it."""
    return await conn.fetch(
        """WITH due AS (
               SELECT id FROM recall_outcomes
                WHERE scored_at IS NULL AND at <= $1::timestamptz - make_interval(secs => $2::float8)
                ORDER BY at, id LIMIT $3 FOR UPDATE SKIP LOCKED)
           UPDATE recall_outcomes o
              SET scored_at = $1,
                  used = EXISTS (SELECT 1 FROM memories m, unnest(m.access_timestamps) AS t
                                  WHERE m.id = o.memory_id AND t > o.at
                                    AND t <= o.at + make_interval(secs => $2::float8))
             FROM due WHERE o.id = due.id
           RETURNING o.memory_id, o.used, o.contributions""",
        now, window_days * 86400.0, limit)


async def prune_outcomes(conn: Executor, now: datetime, keep_days: float) -> int:
    """Scored outcomes older than `keep_days` have done their work: delete them."""
    status = await conn.execute(
        "DELETE FROM recall_outcomes WHERE scored_at IS NOT NULL AND at < $1::timestamptz - make_interval(secs => $2::float8)",
        now, keep_days * 86400.0)
    return int(status.split()[-1])


async def update_utility(conn: Executor, memory_ids: Sequence[int], steps: Sequence[float],
                         mean_rewards: Sequence[float]) -> None:
    """Q <- Q + step * (mean_reward - Q) per memory, one statement (see utility.py)."""
    if not memory_ids:
        return
    await conn.execute(
        """UPDATE memories m SET utility_score = m.utility_score + u.step * (u.r - m.utility_score)
             FROM unnest($1::bigint[], $2::float8[], $3::float8[]) AS u(id, step, r)
            WHERE m.id = u.id""", list(memory_ids), list(steps), list(mean_rewards))


async def dirichlet_factors(db: Executor) -> dict[str, float]:
    """The evolved factor per relevance component (missing = 1.0)."""
    return {r["component"]: r["factor"] for r in await db.fetch("SELECT component, factor FROM dirichlet_alphas")}


async def write_dirichlet(conn: asyncpg.Connection, now: datetime, before: Mapping[str, float],
                          after: Mapping[str, float], evidence: Mapping[str, Any]) -> None:
    await conn.execute(
        """INSERT INTO dirichlet_alphas (component, factor, updated_at)
           SELECT c, f, $1 FROM unnest($2::text[], $3::float8[]) AS t(c, f)
           ON CONFLICT (component) DO UPDATE SET factor = EXCLUDED.factor, updated_at = EXCLUDED.updated_at""",
        now, list(after), [float(v) for v in after.values()])
    await conn.execute(
        "INSERT INTO dirichlet_history (at, before, after, evidence) VALUES ($1, $2::jsonb, $3::jsonb, $4::jsonb)",
        now, json_param(dict(before)), json_param(dict(after)), json_param(dict(evidence)))


async def pathological_weights(db: Executor, limit_evidence: float, limit: int = 20) -> tuple[int, list[asyncpg.Record]]:
    """Memories whose alpha or beta exploded past `limit_evidence`: count and the worst few."""
    rows = await db.fetch(
        """SELECT id, depth_weight_alpha AS alpha, depth_weight_beta AS beta, count(*) OVER () AS total
             FROM memories WHERE depth_weight_alpha > $1 OR depth_weight_beta > $1
            ORDER BY depth_weight_alpha + depth_weight_beta DESC LIMIT $2""", limit_evidence, limit)
    return (int(rows[0]["total"]) if rows else 0), rows


async def weight_history(db: Executor, memory_id: int, limit: int = 50) -> list[asyncpg.Record]:
    """A memory's weight changes, newest first, for introspection (plan §4.5)."""
    return await db.fetch(
        """SELECT at, operation, actor, reason, applied_delta, alpha_after, beta_after, evidence
             FROM consolidation_log WHERE memory_id = $1 ORDER BY at DESC, id DESC LIMIT $2""",
        memory_id, limit)
