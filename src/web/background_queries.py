"""The web view's SQL for the background parts: consolidation, the gut, the DMN.

Same rules as src/web/queries.py (READ ONLY transactions, every list bounded). The
tables of passes, gut deltas, axes and DMN items exist once those parts are migrated;
the pages ask `queries.table_exists` first and only then run these.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from src.web.queries import Rows, fetch


async def weight_changes_by_actor(pool: asyncpg.Pool, days: int) -> Rows:
    return await fetch(pool, """
        SELECT actor, operation, count(*) AS n, COALESCE(sum(applied_delta), 0) AS applied, max(at) AS last_at
          FROM consolidation_log WHERE at >= now() - $1 * INTERVAL '1 day'
         GROUP BY actor, operation ORDER BY n DESC LIMIT 100""", days)


async def recent_weight_changes(pool: asyncpg.Pool, exclude_actors: Sequence[str], limit: int) -> Rows:
    return await fetch(pool, """
        SELECT id, at, memory_id, operation, actor, reason, applied_delta, alpha_after, beta_after
          FROM consolidation_log WHERE NOT (actor = ANY($1::text[]))
         ORDER BY at DESC, id DESC LIMIT $2""", list(exclude_actors), limit)


async def consolidation_passes(pool: asyncpg.Pool, limit: int) -> Rows:
    """Deep passes, newest first, with their phases (checkpoints) folded in as JSON."""
    return await fetch(pool, """
        SELECT p.id, p.trigger, p.status, p.started_at, p.finished_at, p.resumed, p.importance,
               p.llm_calls, p.llm_budget, p.tokens_in, p.tokens_out, p.counts::text AS counts,
               p.skipped::text AS skipped, p.error,
               (SELECT COALESCE(json_agg(json_build_object('phase', c.phase, 'status', c.status,
                                                           'result', c.result) ORDER BY c.started_at), '[]')
                  FROM consolidation_checkpoints c WHERE c.pass_id = p.id)::text AS phases
          FROM consolidation_passes p ORDER BY p.id DESC LIMIT $1""", limit)


async def consolidation_failures(pool: asyncpg.Pool, limit: int) -> Rows:
    return await fetch(pool, """
        SELECT id, at, pass_id, phase, left(error, 300) AS error FROM consolidation_failures
         ORDER BY at DESC, id DESC LIMIT $1""", limit)


async def contradiction_findings(pool: asyncpg.Pool, limit: int) -> Rows:
    """The light ticker's contradiction findings, open ones first, then newest (issue 40 item 3)."""
    return await fetch(pool, """
        SELECT id, at, memory_ids, details->>'layer' AS layer, (details->>'similarity')::float8 AS similarity,
               consumed_at, consumed_pass, left(outcome, 200) AS outcome
          FROM consolidation_findings WHERE kind = 'contradiction'
         ORDER BY (consumed_at IS NULL) DESC, at DESC, id DESC LIMIT $1""", limit)


async def approvals(pool: asyncpg.Pool, limit: int) -> Rows:
    return await fetch(pool, """
        SELECT id, kind, status, created_at, decided_at, left(reason, 300) AS reason, left(decision, 300) AS decision
          FROM approvals ORDER BY (status = 'pending') DESC, created_at DESC, id DESC LIMIT $1""", limit)


async def gut_magnitudes(pool: asyncpg.Pool, limit: int) -> Rows:
    """The last `limit` gut deltas, oldest first (the plot's order)."""
    return await fetch(pool, """
        SELECT * FROM (SELECT id, at, session_id, cycle, magnitude, left(context, 200) AS context, source_tag
                         FROM gut_deltas ORDER BY id DESC LIMIT $1) d ORDER BY id""", limit)


async def gut_axes(pool: asyncpg.Pool) -> Rows:
    """The named axes of the latest computation."""
    return await fetch(pool, """
        SELECT rank, name, explained_variance, outcome_correlation, outcomes_seen, samples, computed_at
          FROM gut_axes WHERE computed_at = (SELECT max(computed_at) FROM gut_axes)
         ORDER BY rank LIMIT 50""")


async def dmn_items(pool: asyncpg.Pool, limit: int) -> Rows:
    return await fetch(pool, """
        SELECT id, at, channel, left(text, 300) AS text, memory_ids, queued, consumed_at
          FROM dmn_items ORDER BY at DESC, id DESC LIMIT $1""", limit)


async def charge_per_day(pool: asyncpg.Pool, days: int) -> Rows:
    """The v0.1 emotional charge the exit gate saw, mean and max per day."""
    return await fetch(pool, """
        SELECT date_trunc('day', at)::date AS day, avg(emotional_charge) AS mean, max(emotional_charge) AS max,
               count(*) AS n
          FROM gate_decisions WHERE emotional_charge IS NOT NULL
           AND at >= date_trunc('day', now()) - ($1 - 1) * INTERVAL '1 day'
         GROUP BY 1 ORDER BY 1""", days)
