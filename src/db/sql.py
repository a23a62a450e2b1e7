"""What every repository module shares: the executor type, the jsonb parameter form, and a
transaction under an advisory lock."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

#: A pool (one statement, its own transaction) or a connection (inside the caller's).
Executor = asyncpg.Pool | asyncpg.Connection


def json_param(value: Any) -> str:
    """`value` as a jsonb parameter: keys sorted (stable rows for tests and diffs), dates
    and other non-JSON values as their text."""
    return json.dumps(value, default=str, sort_keys=True)


@asynccontextmanager
async def locked_transaction(db: Executor, key: int) -> AsyncIterator[asyncpg.Connection]:
    """A transaction on `db` (a connection of it, for a pool) holding the transaction
    advisory lock `key`: what folds and rebuilds of a trigger-kept summary run under."""
    if isinstance(db, asyncpg.Pool):
        async with db.acquire() as conn, locked_transaction(conn, key) as locked:
            yield locked
        return
    async with db.transaction():
        await db.execute("SELECT pg_advisory_xact_lock($1)", key)
        yield db
