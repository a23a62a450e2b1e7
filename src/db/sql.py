"""What every repository module shares: the executor type and the jsonb parameter form."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

#: A pool (one statement, its own transaction) or a connection (inside the caller's).
Executor = asyncpg.Pool | asyncpg.Connection


def json_param(value: Any) -> str:
    """`value` as a jsonb parameter: keys sorted (stable rows for tests and diffs), dates
    and other non-JSON values as their text."""
    return json.dumps(value, default=str, sort_keys=True)
