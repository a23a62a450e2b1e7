"""The web view's SQL: one repository module, read-only, every query bounded.

Each function runs in a READ ONLY transaction on the mind's own pool (or the
standalone viewer's), so a page can never write, and returns plain dicts. Lists
carry a LIMIT; aggregates over time are bounded by a window of days.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from src.recall import kind_counts
from src.weights.center_summary import CENTER_BINS

Rows = list[dict[str, Any]]

# contested: alpha > 5 and beta > 5; uninformed: alpha < 2 and beta < 2 (plan §2.3,
# src/weights/stochastic.py CONTESTED_MIN / UNINFORMED_MAX)
_CONTESTED = "(%(a)s > 5 AND %(b)s > 5)"
_UNINFORMED = "(%(a)s < 2 AND %(b)s < 2)"


async def fetch(pool: asyncpg.Pool, sql: str, *args: Any) -> Rows:
    """Rows of `sql` as dicts, read in a READ ONLY transaction (a page can never write)."""
    async with pool.acquire() as conn, conn.transaction(readonly=True):
        return [dict(r) for r in await conn.fetch(sql, *args)]


async def fetchrow(pool: asyncpg.Pool, sql: str, *args: Any) -> dict[str, Any] | None:
    async with pool.acquire() as conn, conn.transaction(readonly=True):
        row = await conn.fetchrow(sql, *args)
    return dict(row) if row is not None else None


# -- overview ----------------------------------------------------------------------
async def manifest(pool: asyncpg.Pool) -> dict[str, Any] | None:
    """The agent's continuity row, with age and cycle totals."""
    return await fetchrow(pool, """
        SELECT m.created_at, m.times_restarted, m.uptime_total_hours, m.last_started_at,
               m.last_shutdown_at, m.current_session_id, m.embed_model,
               EXTRACT(EPOCH FROM now() - m.created_at) / 86400.0 AS age_days,
               -- the last session's uptime: until its shutdown, or until now while it runs
               EXTRACT(EPOCH FROM COALESCE(CASE WHEN m.last_shutdown_at >= m.last_started_at
                                                THEN m.last_shutdown_at END, now())
                                  - m.last_started_at) / 3600.0 AS session_hours,
               -- the cycles still logged plus those retention rolled up (sql/140)
               (SELECT count(*) FROM thought_log)
                 + (SELECT COALESCE(sum(h.rows), 0) FROM history_daily h WHERE h.source = 'thought_log')
                   AS cycles_total,
               (SELECT count(*) FROM thought_log t WHERE t.session_id = m.current_session_id)
                   AS cycles_session
          FROM agent_manifest m WHERE m.id = 1""")


async def memories_by_type(pool: asyncpg.Pool) -> Rows:
    """Memories per type, from the counts the triggers of sql/142 keep (a few rows, not a
    scan of memories; a mind not started since sql/142 is scanned, as before)."""
    async with pool.acquire() as conn, conn.transaction(readonly=True):
        if await _has_table(conn, "memory_kind_counts"):
            return await kind_counts.by_type(conn)
        return [dict(r) for r in await conn.fetch("""
            SELECT memory_type, count(*) AS n FROM memories GROUP BY memory_type ORDER BY n DESC, memory_type""")]


async def cost_totals(pool: asyncpg.Pool, session_id: str | None) -> dict[str, Any]:
    """Spend this session, in the last 24 h and ever: the session and the day from the
    ledger's indexed rows, lifetime from its per-day totals (llm_calls_daily, sql/140)."""
    row = await fetchrow(pool, """
        SELECT (SELECT COALESCE(sum(cost_usd), 0) FROM llm_calls WHERE session_id = $1) AS session,
               (SELECT COALESCE(sum(cost_usd), 0) FROM llm_calls WHERE at >= now() - INTERVAL '24 hours') AS day,
               COALESCE(sum(cost_usd), 0) AS lifetime,
               COALESCE(sum(calls), 0)::bigint AS calls, COALESCE(sum(failed), 0)::bigint AS failed
          FROM llm_calls_daily""", session_id)
    return row or {}


async def cost_per_day(pool: asyncpg.Pool, days: int) -> Rows:
    return await fetch(pool, """
        SELECT d.day::date AS day, COALESCE(sum(c.cost_usd), 0) AS cost, COALESCE(sum(c.calls), 0)::bigint AS calls
          FROM generate_series(date_trunc('day', now()) - ($1 - 1) * INTERVAL '1 day',
                               date_trunc('day', now()), INTERVAL '1 day') AS d(day)
          LEFT JOIN llm_calls_daily c ON c.day = d.day::date
         GROUP BY d.day ORDER BY d.day""", days)


async def models_in_use(pool: asyncpg.Pool, limit: int) -> Rows:
    return await fetch(pool, """
        SELECT provider, model, sum(calls)::bigint AS calls, max(day) AS last_day
          FROM llm_calls_daily GROUP BY provider, model ORDER BY last_day DESC LIMIT $1""", limit)


async def safety_events(pool: asyncpg.Pool, limit: int) -> Rows:
    return await fetch(pool, """
        SELECT id, at, ceiling, phase, memory_id, reason, enforced
          FROM safety_events ORDER BY at DESC, id DESC LIMIT $1""", limit)


async def center_histogram(pool: asyncpg.Pool, bins: int) -> Rows:
    """How many memories fall in each of `bins` equal bins of center = alpha / (alpha + beta).

    Read from the summary the triggers of sql/080 keep (`bins` must be its CENTER_BINS):
    ~20 rows, not a scan of every memory."""
    if bins != CENTER_BINS:
        raise ValueError(f"the center summary keeps {CENTER_BINS} bins, not {bins}")
    return await fetch(pool, """
        SELECT b.bin, COALESCE(sum(s.memories), 0)::bigint AS n
          FROM generate_series(1, $1) AS b(bin)
          LEFT JOIN memory_center_summary s ON s.bucket = b.bin
         GROUP BY b.bin ORDER BY b.bin""", bins)


async def shape_counts(pool: asyncpg.Pool) -> dict[str, Any]:
    """Contested and uninformed memories now (from the same summary)."""
    return await fetchrow(pool, """
        SELECT COALESCE(sum(contested), 0)::bigint AS contested, COALESCE(sum(uninformed), 0)::bigint AS uninformed,
               COALESCE(sum(memories), 0)::bigint AS total FROM memory_center_summary""") or {}


async def center_histogram_scan(pool: asyncpg.Pool, bins: int) -> Rows:
    """`center_histogram` by scanning memories: for a mind not yet migrated to sql/080."""
    return await fetch(pool, """
        SELECT b.bin, COALESCE(h.n, 0) AS n
          FROM generate_series(1, $1) AS b(bin)
          LEFT JOIN (SELECT LEAST(width_bucket(depth_weight_alpha / (depth_weight_alpha + depth_weight_beta),
                                               0.0, 1.0, $1), $1) AS bin, count(*) AS n
                       FROM memories GROUP BY 1) h ON h.bin = b.bin
         ORDER BY b.bin""", bins)


async def shape_counts_scan(pool: asyncpg.Pool) -> dict[str, Any]:
    """`shape_counts` by scanning memories: for a mind not yet migrated to sql/080."""
    cond = {"a": "depth_weight_alpha", "b": "depth_weight_beta"}
    return await fetchrow(pool, f"""
        SELECT count(*) FILTER (WHERE {_CONTESTED % cond}) AS contested,
               count(*) FILTER (WHERE {_UNINFORMED % cond}) AS uninformed,
               count(*) AS total FROM memories""") or {}


async def shape_changes_per_day(pool: asyncpg.Pool, days: int) -> Rows:
    """Per day: memories whose weight changed and ended the day contested / uninformed."""
    cond = {"a": "alpha_after", "b": "beta_after"}
    return await fetch(pool, f"""
        WITH last AS (
            SELECT DISTINCT ON (memory_id, date_trunc('day', at))
                   memory_id, date_trunc('day', at) AS day, alpha_after, beta_after
              FROM consolidation_log
             WHERE at >= date_trunc('day', now()) - ($1 - 1) * INTERVAL '1 day'
               AND memory_id IS NOT NULL AND alpha_after IS NOT NULL
             ORDER BY memory_id, date_trunc('day', at), at DESC, id DESC)
        SELECT d.day::date AS day,
               count(l.memory_id) FILTER (WHERE {_CONTESTED % cond}) AS contested,
               count(l.memory_id) FILTER (WHERE {_UNINFORMED % cond}) AS uninformed,
               count(l.memory_id) AS changed
          FROM generate_series(date_trunc('day', now()) - ($1 - 1) * INTERVAL '1 day',
                               date_trunc('day', now()), INTERVAL '1 day') AS d(day)
          LEFT JOIN last l ON l.day = d.day
         GROUP BY d.day ORDER BY d.day""", days)


# -- memories ----------------------------------------------------------------------
async def list_memories(pool: asyncpg.Pool, *, memory_type: str | None, source: str | None,
                        min_center: float | None, max_center: float | None, limit: int, offset: int = 0) -> Rows:
    """Newest memories matching the filters (NULL filter = any), `offset` rows in (a page)."""
    return await fetch(pool, """
        SELECT id, memory_type, source_tag, left(content, 300) AS content, created_at, event_time, access_count,
               depth_weight_alpha AS alpha, depth_weight_beta AS beta, immutable,
               depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) AS center
          FROM memories
         WHERE ($1::text IS NULL OR memory_type = $1)
           AND ($2::text IS NULL OR source_tag = $2)
           AND ($3::float8 IS NULL OR depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) >= $3)
           AND ($4::float8 IS NULL OR depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) <= $4)
         ORDER BY created_at DESC, id DESC LIMIT $5 OFFSET $6""", memory_type, source, min_center, max_center,
                        limit, offset)


async def source_tags(pool: asyncpg.Pool, limit: int) -> list[str]:
    """The most used source tags, from the kept counts of sql/142 (as memories_by_type)."""
    async with pool.acquire() as conn, conn.transaction(readonly=True):
        if await _has_table(conn, "memory_kind_counts"):
            return await kind_counts.sources(conn, limit)
        rows = await conn.fetch("""
            SELECT source_tag FROM memories GROUP BY source_tag ORDER BY count(*) DESC LIMIT $1""", limit)
    return [r["source_tag"] for r in rows]


async def memory(pool: asyncpg.Pool, memory_id: int, access_limit: int,
                 content_chars: int) -> dict[str, Any] | None:
    """One memory (its first `content_chars` characters) with its last `access_limit`
    ACT-R presentations, newest first."""
    return await fetchrow(pool, """
        SELECT id, left(content, $3) AS content, length(content) AS content_chars, memory_type, source_tag,
               source_confidence, immutable, compressed,
               content_contextualized, created_at, event_time, last_accessed, access_count, embed_model,
               utility_score, metadata::text AS metadata,
               depth_weight_alpha AS alpha, depth_weight_beta AS beta,
               ARRAY(SELECT t FROM unnest(access_timestamps) AS t ORDER BY t DESC LIMIT $2) AS accesses
          FROM memories WHERE id = $1""", memory_id, access_limit, content_chars)


async def weight_history(pool: asyncpg.Pool, memory_id: int, limit: int) -> Rows:
    return await fetch(pool, """
        SELECT id, at, operation, actor, reason, requested_delta, applied_delta,
               alpha_before, beta_before, alpha_after, beta_after
          FROM consolidation_log WHERE memory_id = $1 ORDER BY at DESC, id DESC LIMIT $2""",
                        memory_id, limit)


async def co_access_neighbours(pool: asyncpg.Pool, memory_id: int, limit: int) -> Rows:
    """Partners from either side of the ordered pair, strongest first."""
    return await fetch(pool, """
        SELECT p.partner AS id, p.co_access_count, p.last_co_accessed,
               m.memory_type, left(m.content, 200) AS content
          FROM (SELECT memory_id_b AS partner, co_access_count, last_co_accessed
                  FROM memory_co_access WHERE memory_id_a = $1
                UNION ALL
                SELECT memory_id_a, co_access_count, last_co_accessed
                  FROM memory_co_access WHERE memory_id_b = $1) p
          JOIN memories m ON m.id = p.partner
         ORDER BY p.co_access_count DESC, p.partner LIMIT $2""", memory_id, limit)


async def supersedes_chain(pool: asyncpg.Pool, memory_id: int, depth: int, limit: int) -> Rows:
    """why_do_i_believe: what this memory was built from (down) and what was built on it (up);
    each row with the link that reached it (`parent`, the memory at its other end, and `via`),
    the nearest one where several paths do, and its dates."""
    return await fetch(pool, """
        WITH RECURSIVE down(id, parent, via, depth) AS (
                SELECT source_id, insight_id, via, 1 FROM memory_supersedes WHERE insight_id = $1
                UNION
                SELECT s.source_id, s.insight_id, s.via, d.depth + 1
                  FROM memory_supersedes s JOIN down d ON s.insight_id = d.id
                 WHERE d.depth < $2),
            up(id, parent, via, depth) AS (
                SELECT insight_id, source_id, via, 1 FROM memory_supersedes WHERE source_id = $1
                UNION
                SELECT s.insight_id, s.source_id, s.via, u.depth + 1
                  FROM memory_supersedes s JOIN up u ON s.source_id = u.id
                 WHERE u.depth < $2),
            chain AS ((SELECT DISTINCT ON (id) 'built_from' AS direction, id, parent, via, depth
                         FROM down ORDER BY id, depth, parent)
                      UNION ALL
                      (SELECT DISTINCT ON (id) 'built_on', id, parent, via, depth
                         FROM up ORDER BY id, depth, parent))
        SELECT c.direction, c.depth, m.id, c.parent, c.via, m.memory_type, left(m.content, 200) AS content,
               m.depth_weight_alpha / (m.depth_weight_alpha + m.depth_weight_beta) AS center,
               m.created_at, m.event_time
          FROM chain c JOIN memories m ON m.id = c.id
         ORDER BY c.direction, c.depth, m.id LIMIT $3""", memory_id, depth, limit)


async def gate_decisions_for(pool: asyncpg.Pool, memory_id: int, limit: int) -> Rows:
    """Gate decisions that wrote or touched this memory, or found it the nearest one."""
    return await fetch(pool, """
        SELECT id, at, gate, action, cell_relevance, cell_novelty, noise_fired, reason,
               left(content_preview, 200) AS content_preview,
               (memory_id = $1) AS wrote_it
          FROM gate_decisions WHERE memory_id = $1 OR nearest_memory_id = $1
         ORDER BY at DESC, id DESC LIMIT $2""", memory_id, limit)


async def session_starts(pool: asyncpg.Pool, since: datetime, until: datetime, limit: int = 50) -> list[datetime]:
    """When each session seen in [since, until] began (its first cycle, found on the
    (session_id, cycle) index), for those that began after `since`: the restarts a time axis marks."""
    rows = await fetch(pool, """
        SELECT f.at AS started
          FROM (SELECT DISTINCT session_id FROM thought_log WHERE at BETWEEN $1 AND $2) s
          CROSS JOIN LATERAL (SELECT t.at FROM thought_log t WHERE t.session_id = s.session_id
                               ORDER BY t.cycle, t.id LIMIT 1) f
         WHERE f.at > $1 ORDER BY 1 LIMIT $3""", since, until, limit)
    return [r["started"] for r in rows]


# -- thoughts ----------------------------------------------------------------------
async def thoughts(pool: asyncpg.Pool, limit: int) -> Rows:
    """The last `limit` cycles, newest first."""
    return await fetch(pool, """
        SELECT id, at, session_id, cycle, source_tag, left(attention_focus, 300) AS attention_focus,
               candidates::text AS candidates, winner::text AS winner, left(output, 500) AS output,
               confidence, escalated, tokens_in, tokens_out, cost_usd, duration_ms
          FROM thought_log ORDER BY id DESC LIMIT $1""", limit)


async def winners_per_day(pool: asyncpg.Pool, days: int) -> Rows:
    return await fetch(pool, """
        SELECT date_trunc('day', at)::date AS day, COALESCE(source_tag, '?') AS source, count(*) AS n
          FROM thought_log WHERE at >= date_trunc('day', now()) - ($1 - 1) * INTERVAL '1 day'
         GROUP BY 1, 2 ORDER BY 1, 2""", days)


async def escalations(pool: asyncpg.Pool, limit: int) -> Rows:
    return await fetch(pool, """
        SELECT id, at, left(attention_focus, 200) AS attention_focus, path, threshold, confidence_before,
               confidence_after_retry, escalated, system2_ok, reason
          FROM escalations ORDER BY at DESC, id DESC LIMIT $1""", limit)


# -- gates -------------------------------------------------------------------------
async def gate_cells_per_day(pool: asyncpg.Pool, days: int) -> Rows:
    """Exit-gate decisions per matrix cell per day."""
    return await fetch(pool, """
        SELECT date_trunc('day', at)::date AS day,
               cell_relevance || '/' || cell_novelty AS cell, count(*) AS n
          FROM gate_decisions
         WHERE gate = 'exit' AND cell_relevance IS NOT NULL AND cell_novelty IS NOT NULL
           AND at >= date_trunc('day', now()) - ($1 - 1) * INTERVAL '1 day'
         GROUP BY 1, 2 ORDER BY 1, 2""", days)


async def gate_matrix(pool: asyncpg.Pool) -> Rows:
    """Counts per gate, cell and action, with how many were noise flips."""
    return await fetch(pool, """
        SELECT gate, COALESCE(cell_relevance, '-') AS relevance, COALESCE(cell_novelty, '-') AS novelty,
               action, count(*) AS n, count(*) FILTER (WHERE noise_fired) AS flips
          FROM gate_decisions GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4 LIMIT 200""")


async def gate_decisions(pool: asyncpg.Pool, *, actions: Sequence[str] | None, noise_only: bool,
                         limit: int) -> Rows:
    return await fetch(pool, """
        SELECT id, at, gate, action, cell_relevance, cell_novelty, cell_action, noise_fired, random_draw,
               noise_rate, rule, memory_id, left(content_preview, 200) AS content_preview, reason
          FROM gate_decisions
         WHERE ($1::text[] IS NULL OR action = ANY($1)) AND (NOT $2 OR noise_fired)
         ORDER BY at DESC, id DESC LIMIT $3""", list(actions) if actions else None, noise_only, limit)


# -- chat ------------------------------------------------------------------------------
async def chat_lines(pool: asyncpg.Pool, limit: int, chars: int) -> Rows:
    """The newest `limit` messages of the input journal, every channel, oldest first, each
    with the reply that answered it: the output of the cycle its row points to (sql/158;
    messages a turn answered together point to the same cycle). Texts are cut to `chars`
    (`text_chars`, `reply_chars`: their whole length)."""
    return await fetch(pool, """
        SELECT j.id, j.channel, j.state, left(j.line, $2) AS text, length(j.line) AS text_chars,
               j.received_at, j.finished_at AS answered_at, j.answered_session, j.answered_cycle,
               left(t.output, $2) AS reply, length(t.output) AS reply_chars
          FROM (SELECT id, channel, state, line, received_at, finished_at, answered_session, answered_cycle
                  FROM input_journal WHERE kind = 'message' ORDER BY id DESC LIMIT $1) j
          LEFT JOIN LATERAL (SELECT output FROM thought_log
                              WHERE session_id = j.answered_session AND cycle = j.answered_cycle
                              ORDER BY id LIMIT 1) t ON true
         ORDER BY j.id""", limit, chars)


async def table_exists(pool: asyncpg.Pool, names: Sequence[str]) -> dict[str, bool]:
    """Which of these tables exist (pages for parts still being built)."""
    rows = await fetch(pool, """
        SELECT n AS name, to_regclass(n) IS NOT NULL AS present FROM unnest($1::text[]) AS n""", list(names))
    return {r["name"]: r["present"] for r in rows}


async def _has_table(conn: asyncpg.Connection, name: str) -> bool:
    return await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", name)


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
