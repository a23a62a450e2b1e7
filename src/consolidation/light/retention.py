"""Bounded history: each history table keeps a retention window (issue 24).

The light ticker calls `enforce` every `retention.interval_s`. For each table it deletes,
oldest first and at most `retention.batch` rows per statement (at most
`retention.max_batches` statements per table per tick), the rows older than the
table's `days` or beyond its newest `max_rows`; the same statement folds what it deleted
into `history_daily` (one row per day and key), so the day-by-day counts survive the rows.
The ledger's cost totals are kept at insert time (`llm_calls_daily`, sql/140), so
deleting old `llm_calls` rows never changes `/cost`.

`max_rows` counts by identity: rows with an id at or below max(id) − max_rows go (one
index probe, never a count(*)); ids skipped by rolled-back inserts make it keep fewer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

import asyncpg

from src.consolidation.settings import RetentionSettings, TableRetention

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HistoryTable:
    """How one table rolls up: its day key and its one summed quantity (SQL over `gone`)."""

    name: str
    key: str
    amount: str = "0"


# Fixed SQL fragments (no input reaches them); values are bound parameters.
HISTORY_TABLES: dict[str, HistoryTable] = {t.name: t for t in (
    HistoryTable("consolidation_log", "gone.actor || '|' || gone.operation", "COALESCE(gone.applied_delta, 0)"),
    HistoryTable("gate_decisions", "gone.gate || '|' || gone.action"),
    HistoryTable("thought_log", "COALESCE(gone.source_tag, '') || CASE WHEN gone.escalated THEN '|escalated' ELSE '' END",
                 "gone.tokens_in + gone.tokens_out"),
    HistoryTable("gut_deltas", "COALESCE(gone.source_tag, '')", "gone.magnitude"),
    HistoryTable("llm_calls", "gone.provider || '|' || gone.model || '|' || gone.purpose",
                 "gone.tokens_in + gone.tokens_out"),
    HistoryTable("dmn_items", "gone.channel || CASE WHEN gone.consumed_at IS NULL THEN '|unconsumed' ELSE '' END"),
    HistoryTable("recall_outcomes", "CASE gone.used WHEN true THEN 'used' WHEN false THEN 'unused' ELSE 'unscored' END"),
    HistoryTable("safety_events", "gone.ceiling || CASE WHEN gone.enforced THEN '|enforced' ELSE '|shadow' END"),
    HistoryTable("escalations", "COALESCE(gone.source_tag, '')"),
)}


def _statement(table: HistoryTable, by: str) -> str:
    """Delete one batch of `table` and roll it up; how many went.

    `by` "age": rows with `at` before $1, walked on the table's `at` index; "id": rows
    with id <= $1, walked on its primary key. Two statements, not one with an OR: an OR
    walks the whole index when nothing is due."""
    where, order = ("at < $1", "at") if by == "age" else ("id <= $1", "id")
    return f"""
        WITH doomed AS (
            SELECT id FROM {table.name} WHERE {where} ORDER BY {order} LIMIT $2
        ), gone AS (
            DELETE FROM {table.name} t USING doomed WHERE t.id = doomed.id RETURNING t.*
        ), rolled AS (
            INSERT INTO history_daily AS h (source, day, key, rows, amount)
            SELECT '{table.name}', (gone.at AT TIME ZONE 'UTC')::date, {table.key}, count(*), sum({table.amount})
              FROM gone GROUP BY 2, 3
            ON CONFLICT (source, day, key) DO UPDATE
               SET rows = h.rows + EXCLUDED.rows, amount = h.amount + EXCLUDED.amount
            RETURNING rows
        )
        SELECT count(*) FROM gone"""


async def _id_floor(conn: asyncpg.Connection, table: str, rule: TableRetention) -> int:
    """Ids at or below this are beyond the table's `max_rows` (0: no row cap, or not reached)."""
    if rule.max_rows is None:
        return 0
    newest = await conn.fetchval(f"SELECT max(id) FROM {table}")
    return max(0, (newest or 0) - rule.max_rows)


async def _drain(conn: asyncpg.Connection, statement: str, bound: object, settings: RetentionSettings) -> int:
    """Run one delete statement batch after batch, up to `max_batches`; rows deleted."""
    total = 0
    for _ in range(settings.max_batches):
        n = await conn.fetchval(statement, bound, settings.batch)
        total += n
        if n < settings.batch:
            break
    return total


async def enforce(pool: asyncpg.Pool, settings: RetentionSettings, now: datetime) -> dict[str, int]:
    """One retention round over every configured table; rows deleted per table."""
    deleted: dict[str, int] = {}
    for name, rule in settings.tables.items():
        table = HISTORY_TABLES[name]
        async with pool.acquire() as conn:
            total = 0
            if rule.days is not None:
                total += await _drain(conn, _statement(table, "age"), now - timedelta(days=rule.days), settings)
            floor = await _id_floor(conn, name, rule)
            if floor:
                total += await _drain(conn, _statement(table, "id"), floor, settings)
        if total:
            deleted[name] = total
    if deleted:
        log.info("retention: removed %s (rolled up per day)", ", ".join(f"{n} {t}" for t, n in deleted.items()))
    return deleted


async def table_sizes(pool: asyncpg.Pool) -> dict[str, tuple[int, int]]:
    """Each history table's (rows, bytes with indexes and TOAST): for the bench and the operator."""
    rows = await pool.fetch(
        """SELECT c.relname, c.reltuples::bigint AS est, pg_total_relation_size(c.oid) AS bytes
             FROM pg_class c WHERE c.relname = ANY($1::text[]) AND c.relkind = 'r'""",
        [*HISTORY_TABLES, "history_daily", "llm_calls_daily", "memories"])
    return {r["relname"]: (max(0, r["est"]), r["bytes"]) for r in rows}
