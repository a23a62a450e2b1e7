"""SQL of the DMN: the sampling pool, dmn_items, the last attention choice for review."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np

from src.db.sql import Executor

# n is only compared with the sample size: counted up to size + 1 (a bounded scan), and
# min/max are index probes — no count over the whole store every tick.
_BOUNDS = """SELECT (SELECT count(*) FROM (SELECT id FROM memories ORDER BY id LIMIT $1::int + 1) s) AS n,
                    min(id) AS lo, max(id) AS hi FROM memories"""

# The pool rows with the features the bias needs. "In tension": a tension memory, a
# correction, or a memory consolidation marked as contradicting another (metadata).
# "About the self": a self-reflection, or first-person content.
_POOL = """
SELECT id, content, embedding, memory_type,
       depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) AS center,
       extract(epoch FROM ($2 - COALESCE(last_accessed, created_at))) / 3600.0 AS hours_unseen,
       extract(epoch FROM ($2 - COALESCE(event_time, created_at))) / 86400.0 AS age_days,
       COALESCE(event_time, created_at) AS at,
       (memory_type IN ('tension', 'correction') OR metadata ? 'contradicts'
        OR metadata->>'kind' = 'tension') AS tension,
       (memory_type = 'reflection'
        OR content ~* '\\m(I|me|my|myself|mine)\\M') AS about_self
  FROM memories
 WHERE embedding IS NOT NULL AND embed_model = $3 AND NOT immutable
"""
# Two statements, not `$1 IS NULL OR id = ANY($1)`: a cached generic plan of the OR form
# scans every memory; the sampled form walks the primary key.
_POOL_ALL = _POOL + "   AND $1::bigint[] IS NULL\n"
_POOL_SAMPLED = _POOL + "   AND id = ANY($1::bigint[])\n"

_INSERT_ITEM = """
INSERT INTO dmn_items (at, channel, memory_ids, text, detail, queued)
VALUES ($1, $2, $3, $4, $5::jsonb, $6)
RETURNING id
"""

# The latest cycle in which something lost attention: the winner and the best loser.
_LAST_CHOICE = """
SELECT id, attention_focus, candidates
  FROM thought_log
 WHERE jsonb_array_length(candidates) >= 2 AND id > $1
 ORDER BY id DESC
 LIMIT 1
"""

_LAST_USER = """
SELECT max(at) FROM thought_log WHERE source_tag = 'external_user' AND at > $1
"""


async def pool_rows(db: Executor, rng: np.random.Generator, size: int, now: datetime,
                    embed_model: str) -> list[asyncpg.Record]:
    """A uniform pre-sample of at most `size` memories (all of them when the store is small)."""
    bounds = await db.fetchrow(_BOUNDS, size)
    if not bounds["n"]:
        return []
    ids = None
    if bounds["n"] > size:
        span = bounds["hi"] - bounds["lo"] + 1
        # ids are dense enough (identity column); gaps only shrink the pool a little
        ids = (bounds["lo"] + rng.choice(span, size=min(size, span), replace=False)).tolist()
    return await db.fetch(_POOL_ALL if ids is None else _POOL_SAMPLED, ids, now, embed_model)


async def record_item(db: Executor, *, at: datetime, channel: str, memory_ids: Sequence[int], text: str,
                      detail: Mapping[str, Any], queued: bool) -> int:
    return await db.fetchval(_INSERT_ITEM, at, channel, list(memory_ids), text,
                             json.dumps(dict(detail), default=str), queued)


async def last_choice(db: Executor, after_id: int) -> asyncpg.Record | None:
    return await db.fetchrow(_LAST_CHOICE, after_id)


async def last_user_at(db: Executor, since: datetime) -> datetime | None:
    return await db.fetchval(_LAST_USER, since)
