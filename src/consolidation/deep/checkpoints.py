"""Deep-pass bookkeeping SQL: `consolidation_passes`, `consolidation_checkpoints`,
`consolidation_units` and `consolidation_failures` (pass rows, per-phase checkpoints, units
of work, failures), and the importance trigger (see deep_pass.py for how they make a pass
resumable)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import asyncpg

from src.db.sql import Executor


async def resumable_pass(conn: Executor) -> asyncpg.Record | None:
    """The newest pass when it is unfinished: 'running' (a crashed or stopped process left
    it) or 'failed' (a phase failed; resumed at that phase after its back-off)."""
    row = await conn.fetchrow(
        "SELECT id, trigger, status, llm_calls, tokens_in, tokens_out, failures, retry_after "
        "FROM consolidation_passes ORDER BY id DESC LIMIT 1")
    return row if row is not None and row["status"] in ("running", "failed") else None


async def open_pass(conn: Executor, trigger: str, importance: float | None, budget: int) -> int:
    return await conn.fetchval(
        "INSERT INTO consolidation_passes (trigger, importance, llm_budget) VALUES ($1, $2, $3) RETURNING id",
        trigger, importance, budget)


async def mark_resumed(conn: Executor, pass_id: int) -> None:
    await conn.execute("UPDATE consolidation_passes SET resumed = resumed + 1, status = 'running', "
                       "retry_after = NULL WHERE id = $1", pass_id)


async def done_phases(conn: Executor, pass_id: int) -> set[str]:
    """The phases of the pass that are not run again: done, or skipped after failing."""
    rows = await conn.fetch(
        "SELECT phase FROM consolidation_checkpoints WHERE pass_id = $1 AND status IN ('done', 'skipped')",
        pass_id)
    return {r["phase"] for r in rows}


async def start_phase(conn: Executor, pass_id: int, phase: str) -> dict[str, Any]:
    """Checkpoint 'running' for the phase; return its finished unit keys with their payloads."""
    await conn.execute(
        """INSERT INTO consolidation_checkpoints (pass_id, phase, status) VALUES ($1, $2, 'running')
           ON CONFLICT (pass_id, phase) DO UPDATE SET started_at = now()""", pass_id, phase)
    rows = await conn.fetch("SELECT key, payload FROM consolidation_units WHERE pass_id = $1 AND phase = $2",
                            pass_id, phase)
    return {r["key"]: None if r["payload"] is None else json.loads(r["payload"]) for r in rows}


async def phase_result(conn: Executor, pass_id: int, phase: str) -> dict[str, Any] | None:
    """The result a finished phase of this pass saved (e.g. Phase 1's questions)."""
    raw = await conn.fetchval(
        "SELECT result FROM consolidation_checkpoints WHERE pass_id = $1 AND phase = $2 AND status = 'done'",
        pass_id, phase)
    return None if raw is None else json.loads(raw)


async def finish_phase(conn: Executor, pass_id: int, phase: str, result: Mapping[str, Any],
                       status: str = "done") -> None:
    """The phase's end: 'done', or 'skipped' after failing too often (failures.py)."""
    await conn.execute(
        """UPDATE consolidation_checkpoints SET status = $4, finished_at = now(), result = $3::jsonb
            WHERE pass_id = $1 AND phase = $2""", pass_id, phase, json.dumps(result), status)


async def fail_phase(conn: Executor, pass_id: int, phase: str, error: str, announced: Sequence[str]) -> int:
    """The phase failed once more: its checkpoint says so, keeping what the phase announced
    before failing (its writes are not redone, so they are announced when it ends). How
    many times in a row it has failed."""
    return await conn.fetchval(
        """UPDATE consolidation_checkpoints
              SET status = 'failed', failures = failures + 1, error = $3, finished_at = now(),
                  result = jsonb_build_object('data', jsonb_build_object('announce', $4::jsonb))
            WHERE pass_id = $1 AND phase = $2 RETURNING failures""",
        pass_id, phase, error, json.dumps(list(announced)))


async def announced_before(conn: Executor, pass_id: int, phase: str) -> list[str]:
    """What an earlier attempt of this phase announced before it failed (fail_phase)."""
    raw = await conn.fetchval(
        """SELECT result->'data'->'announce' FROM consolidation_checkpoints
            WHERE pass_id = $1 AND phase = $2 AND status = 'failed'""", pass_id, phase)
    return [] if raw is None else list(json.loads(raw))


async def mark_unit_done(conn: Executor, pass_id: int, phase: str, key: str,
                         payload: Any = None) -> None:
    await conn.execute(
        """INSERT INTO consolidation_units (pass_id, phase, key, payload) VALUES ($1, $2, $3, $4::jsonb)
           ON CONFLICT DO NOTHING""",
        pass_id, phase, key, None if payload is None else json.dumps(payload, default=str))


async def save_progress(conn: Executor, pass_id: int, *, calls: int, tokens_in: int, tokens_out: int,
                        counts: Mapping[str, Any], skipped: Mapping[str, str]) -> None:
    """The pass row's running totals (written after every phase, so a crash keeps them)."""
    await conn.execute(
        """UPDATE consolidation_passes SET llm_calls = $2, tokens_in = $3, tokens_out = $4,
                  counts = $5::jsonb, skipped = $6::jsonb WHERE id = $1""",
        pass_id, calls, tokens_in, tokens_out, json.dumps(counts), json.dumps(skipped))


async def save_calls(conn: Executor, pass_id: int, calls: int, tokens_in: int, tokens_out: int) -> None:
    """The pass's LLM spend so far, after every call: a killed pass resumes with its true budget."""
    await conn.execute("UPDATE consolidation_passes SET llm_calls = $2, tokens_in = $3, tokens_out = $4 "
                       "WHERE id = $1", pass_id, calls, tokens_in, tokens_out)


async def finish_pass(conn: Executor, pass_id: int, status: str, error: str | None = None) -> None:
    await conn.execute(
        "UPDATE consolidation_passes SET status = $2, finished_at = now(), error = $3 WHERE id = $1",
        pass_id, status, error)


async def fail_pass(conn: Executor, pass_id: int, *, phase: str, error: str, failures: int,
                    retry_after: datetime) -> None:
    """The pass stopped at a failed phase; the scheduler resumes it from `retry_after`."""
    await conn.execute(
        """UPDATE consolidation_passes SET status = 'failed', finished_at = now(), error = $2,
                  failed_phase = $3, failures = $4, retry_after = $5 WHERE id = $1""",
        pass_id, error, phase, failures, retry_after)


async def pass_row(conn: Executor, pass_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow("SELECT * FROM consolidation_passes WHERE id = $1", pass_id)


async def last_pass(conn: Executor) -> asyncpg.Record | None:
    return await conn.fetchrow("SELECT * FROM consolidation_passes ORDER BY id DESC LIMIT 1")


async def last_pass_start(conn: Executor) -> datetime | None:
    """When the last pass that did not fail began (the trigger counts from there)."""
    return await conn.fetchval(
        "SELECT max(started_at) FROM consolidation_passes WHERE status <> 'failed'")


async def previous_pass_start(db: Executor, pass_id: int) -> datetime | None:
    """When the last finished deep pass before `pass_id` began (None: there is none)."""
    return await db.fetchval(
        "SELECT max(started_at) FROM consolidation_passes WHERE id < $1 AND status = 'done'", pass_id)


async def new_experiences_since_last_pass(conn: Executor, pass_id: int) -> int:
    """Memories written since the last finished pass before `pass_id` (the pass's own
    writes, source internal_consolidation, do not count). All of them before a first pass."""
    return await conn.fetchval(
        """SELECT count(*) FROM memories
            WHERE source_tag <> 'internal_consolidation'
              AND created_at > COALESCE((SELECT max(started_at) FROM consolidation_passes
                                          WHERE status = 'done' AND id < $1), '-infinity')""", pass_id)


async def record_failure(conn: Executor, pass_id: int | None, phase: str, error: str,
                         items: Sequence[Any]) -> None:
    await conn.execute(
        "INSERT INTO consolidation_failures (pass_id, phase, error, items) VALUES ($1, $2, $3, $4::jsonb)",
        pass_id, phase, error, json.dumps(list(items), default=str))


# -- the importance trigger -----------------------------------------------------------------

async def cumulative_importance(conn: Executor, since: datetime | None) -> float:
    """Sum of relevance * (1 + emotional charge) over what the exit gate wrote since `since`.

    Only decisions that wrote to the store count (persist, persist_flag, reinforce): a
    dropped or buffered item has not changed what the mind knows yet.
    """
    return float(await conn.fetchval(
        """SELECT COALESCE(sum(LEAST(GREATEST(COALESCE(relevance, 0), 0), 1)
                               * (1 + COALESCE(emotional_charge, 0))), 0)::float8
             FROM gate_decisions
            WHERE gate = 'exit' AND action IN ('persist', 'persist_flag', 'reinforce')
              AND ($1::timestamptz IS NULL OR at > $1)""", since))
