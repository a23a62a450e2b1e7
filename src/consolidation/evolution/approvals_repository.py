"""The SQL of the operator approval queue (plan §4.3): `approvals`.

A change the mind may not make alone yet (a promotion above 0.85 while trust is low, a
skill proposal) waits here until `/approve` or `/reject` decides it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import asyncpg

from src.db.sql import Executor, json_param


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
    # NO KEY: rows that reference this one (promotions.approval_id) may be written on
    # another connection (a deep pass) while the lock is held; their foreign-key check
    # takes FOR KEY SHARE, which NO KEY UPDATE allows.
    return await conn.fetchrow(
        "SELECT id, kind, payload, reason, status, decision FROM approvals WHERE id = $1 FOR NO KEY UPDATE",
        approval_id)


async def decide_approval(conn: asyncpg.Connection, approval_id: int, status: str, decision: str,
                          now: datetime) -> None:
    await conn.execute(
        "UPDATE approvals SET status = $2, decision = $3, decided_at = $4 WHERE id = $1",
        approval_id, status, decision, now)
