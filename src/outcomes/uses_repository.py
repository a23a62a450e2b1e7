"""The SQL of `memory_uses` (sql/130): the evidence that a memory was used (plan §5.3).

Written by the loop's aftermath (what an answer drew on, the user's plain feedback on it)
and by the guardian's /good and /bad; read by recall's outcome scoring and folded into
utility by consolidation. Times are the caller's `now`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from src.db.sql import Executor


@dataclass(frozen=True)
class Use:
    """One row: `kind` of evidence about `memory_id` (see sql/130 for the kinds)."""

    memory_id: int
    kind: str
    valence: float
    share: float | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Answer:
    """An answer the user saw: its cycle, and the memories of its context by track."""

    session_id: str | None
    cycle: int
    at: datetime
    context_ids: Mapping[str, Sequence[int]]


async def insert_uses(db: Executor, uses: Sequence[Use], *, at: datetime, session_id: str | None,
                      cycle: int | None) -> None:
    """All of one event's rows in one statement."""
    if not uses:
        return
    await db.execute(
        """INSERT INTO memory_uses (at, memory_id, kind, valence, session_id, cycle, share, evidence)
           SELECT $1, m, k, v, $2, $3, s, e::jsonb
             FROM unnest($4::bigint[], $5::text[], $6::float8[], $7::float8[], $8::text[]) AS t(m, k, v, s, e)""",
        at, session_id, cycle, [u.memory_id for u in uses], [u.kind for u in uses],
        [float(u.valence) for u in uses], [u.share for u in uses],
        [json.dumps(dict(u.evidence), default=str) for u in uses])


# The newest cycle the user's message won that had an output: the answer the user saw last.
_LAST_ANSWER = """
SELECT session_id, cycle, at, context_summary->'ids' AS ids
  FROM thought_log
 WHERE winner->>'source' = 'user' AND output IS NOT NULL
   AND NOT (session_id IS NOT DISTINCT FROM $1::text AND cycle = $2::int)
 ORDER BY id DESC
 LIMIT 1
"""


async def last_answer(db: Executor, *, not_cycle: tuple[str | None, int] | None = None) -> Answer | None:
    """The last answer to a user's message (`not_cycle`: leave this one out — the cycle
    asking, whose row may already be written)."""
    session, cycle = not_cycle if not_cycle is not None else (None, -1)
    row = await db.fetchrow(_LAST_ANSWER, session, cycle)
    if row is None:
        return None
    ids = json.loads(row["ids"]) if row["ids"] else {}
    return Answer(row["session_id"], row["cycle"], row["at"],
                  {k: [int(i) for i in v] for k, v in ids.items() if isinstance(v, list)})


async def reflected_in(db: Executor, session_id: str | None, cycle: int) -> list[int]:
    """The memories the answer of (session_id, cycle) drew on, in id order."""
    rows = await db.fetch(
        """SELECT DISTINCT memory_id FROM memory_uses
            WHERE kind = 'reflected' AND session_id IS NOT DISTINCT FROM $1 AND cycle = $2
            ORDER BY memory_id""", session_id, cycle)
    return [r["memory_id"] for r in rows]


async def memory_texts(db: Executor, memory_ids: Sequence[int]) -> dict[int, str]:
    """id -> content of the memories that exist."""
    rows = await db.fetch("SELECT id, content FROM memories WHERE id = ANY($1::bigint[])", list(memory_ids))
    return {r["id"]: r["content"] for r in rows}


async def uses_of(db: asyncpg.Pool | asyncpg.Connection, memory_id: int) -> list[asyncpg.Record]:
    """Every piece of evidence about one memory, oldest first (tests, the operator)."""
    return await db.fetch("SELECT at, kind, valence, share, session_id, cycle, evidence, folded "
                          "FROM memory_uses WHERE memory_id = $1 ORDER BY id", memory_id)
