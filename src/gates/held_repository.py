"""The SQL of copilot's held items (table `held_memories`, sql/090).

`hold` runs inside the exit gate's flush transaction (src/gates/exit.py `_write`),
so an item is held exactly when the rest of its chunk is decided: a crash before
the commit leaves its scratch row unflushed and unheld (evaluated again), after it
the item is held for good. `take` runs inside the transaction that writes the
guardian's answer: it deletes the rows it returns, so an answer is applied at most
once — a second answer, or a crash before the commit, finds (or leaves) the row.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

import asyncpg
import numpy as np

from src.db.sql import Executor


def _vector_text(v: np.ndarray) -> str:
    """pgvector's text form; exact for float32 (repr of each value round-trips)."""
    return "[" + ",".join(repr(float(x)) for x in np.asarray(v, dtype=np.float32)) + "]"


# Embeddings go in as text: asyncpg cannot encode an array of pgvector values.
_HOLD = """
INSERT INTO held_memories (scratch_id, action, why, embed_model, embedding, evaluation,
                           flush_reason, held_at)
SELECT s.scratch_id, s.action, s.why, $4, s.embedding::vector, s.evaluation, $7, $8
  FROM unnest($1::bigint[], $2::text[], $3::text[], $5::text[], $6::jsonb[])
       AS s(scratch_id, action, why, embedding, evaluation)
"""


class HeldRow(NamedTuple):
    """One held item as `hold` writes it: scratch id, action, why, vector and evaluation JSON."""

    scratch_id: int
    action: str
    why: str
    vec: np.ndarray
    evaluation: str


async def hold(conn: asyncpg.Connection, rows: Sequence[HeldRow], embed_model: str,
               flush_reason: str, held_at: datetime) -> None:
    """Write the held items of one flush in one statement (inside its transaction)."""
    if rows:
        await conn.execute(_HOLD, [r.scratch_id for r in rows], [r.action for r in rows],
                           [r.why for r in rows], embed_model, [_vector_text(r.vec) for r in rows],
                           [r.evaluation for r in rows], flush_reason, held_at)


_COLUMNS = """h.scratch_id, h.action, h.why, h.embed_model, h.held_at, h.flush_reason,
              s.content, s.source_tag, s.created_at"""

_LIST = f"""
SELECT {_COLUMNS}
  FROM held_memories h JOIN scratch_buffer s ON s.id = h.scratch_id
 ORDER BY h.held_at, h.scratch_id
 LIMIT $1
"""


async def held_items(db: Executor, limit: int = 1000) -> list[asyncpg.Record]:
    """Every held item (without its evaluation), oldest first — for the question and listings."""
    return await db.fetch(_LIST, limit)


async def count_held(db: Executor) -> int:
    return await db.fetchval("SELECT count(*) FROM held_memories")


_TAKE = """
WITH taken AS (
    DELETE FROM held_memories WHERE scratch_id = ANY($1::bigint[])
    RETURNING scratch_id, action, why, embed_model, embedding, evaluation, held_at
)
SELECT t.*, s.content, s.source_tag, s.source_confidence, s.tags, s.metadata, s.created_at,
       s.expires_at
  FROM taken t JOIN scratch_buffer s ON s.id = t.scratch_id
 ORDER BY t.held_at, t.scratch_id
"""


async def take(conn: asyncpg.Connection, scratch_ids: Sequence[int]) -> list[asyncpg.Record]:
    """Delete and return the held rows of `scratch_ids` that are still held (inside the
    transaction that writes the answer); rows decided already are simply not returned."""
    return await conn.fetch(_TAKE, list(scratch_ids))
