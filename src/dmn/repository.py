"""SQL of the DMN: the sampling pool, dmn_items, the last attention choice for review.

Every item ends somewhere (sql/131): `consumed_by` 'loop' once a self-prompt or review is
queued, 'deep_pass' once a creative association or identity signal became a question of
the deep pass (src/consolidation/deep/dmn_inputs.py), 'expired' when nothing took it
within the TTL. Times are the caller's `now`.
"""

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
# "About the self" is decided from who said it (src/dmn/sampling.about_self): the source tag,
# `metadata.speaker` and the kind come with each row; with whether it was imported (an
# import key), they say whether an imported stranger's memory it is (sampling.imported_stranger).
_POOL = """
SELECT id, content, embedding, memory_type, source_tag,
       metadata->>'speaker' AS speaker, metadata->>'kind' AS kind, import_key IS NOT NULL AS imported,
       depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) AS center,
       extract(epoch FROM ($2 - COALESCE(last_accessed, created_at))) / 3600.0 AS hours_unseen,
       extract(epoch FROM ($2 - COALESCE(event_time, created_at))) / 86400.0 AS age_days,
       COALESCE(event_time, created_at) AS at,
       (memory_type IN ('tension', 'correction') OR metadata ? 'contradicts'
        OR metadata->>'kind' = 'tension') AS tension
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


# Unconsumed items past their TTL, oldest first, a bounded batch (the partial index on
# (channel, at) WHERE consumed_at IS NULL serves it).
_EXPIRE = """
UPDATE dmn_items SET consumed_at = $1, consumed_by = 'expired',
       outcome = jsonb_build_object('expired_after_days', $2::float8)
 WHERE id IN (SELECT id FROM dmn_items
               WHERE consumed_at IS NULL AND at < $1::timestamptz - make_interval(secs => $2::float8 * 86400)
               ORDER BY at, id LIMIT $3 FOR UPDATE SKIP LOCKED)
"""

_WAITING = """
SELECT id, at, channel, memory_ids, text, detail
  FROM dmn_items
 WHERE consumed_at IS NULL AND channel = ANY($1::text[])
 ORDER BY at DESC, id DESC
 LIMIT $2
"""

# The item and every unconsumed twin (same channel, same memories: the DMN surfaced the
# same association again) are consumed together.
_CONSUME = """
UPDATE dmn_items d SET consumed_at = $2, consumed_by = $3,
       outcome = CASE WHEN d.id = $1 THEN $4::jsonb ELSE jsonb_build_object('same_as', $1::bigint) END
  FROM dmn_items i
 WHERE i.id = $1
   AND (d.id = i.id OR (d.consumed_at IS NULL AND d.channel = i.channel AND cardinality(i.memory_ids) > 0
                        AND d.memory_ids = i.memory_ids
                        AND d.detail->>'value' IS NOT DISTINCT FROM i.detail->>'value'))
"""

# The DMN items behind derived memories (their metadata names the item).
_ORIGINS = """
SELECT m.id AS memory_id, d.id, d.at, d.channel, d.text, d.memory_ids
  FROM memories m JOIN dmn_items d ON d.id = (m.metadata->>'dmn_item_id')::bigint
 WHERE m.id = ANY($1::bigint[]) AND m.metadata ? 'dmn_item_id'
"""


async def mark_queued(db: Executor, item_id: int, at: datetime) -> None:
    """A self-prompt or review went to the loop's attention: the loop consumed it."""
    await db.execute("UPDATE dmn_items SET consumed_at = $2, consumed_by = 'loop' WHERE id = $1", item_id, at)


async def expire_items(db: Executor, now: datetime, ttl_days: float, batch: int) -> int:
    """Mark up to `batch` items older than `ttl_days` that nothing consumed; how many."""
    status = await db.execute(_EXPIRE, now, ttl_days, batch)
    return int(status.split()[-1])


async def waiting_items(db: Executor, channels: Sequence[str], limit: int) -> list[asyncpg.Record]:
    """Unconsumed items of `channels`, newest first (the tick expires the old ones)."""
    return await db.fetch(_WAITING, list(channels), limit)


async def consume_item(db: Executor, item_id: int, *, by: str, at: datetime, outcome: Mapping[str, Any]) -> int:
    """Consume one item (and its unconsumed twins); how many rows."""
    status = await db.execute(_CONSUME, item_id, at, by, json.dumps(dict(outcome), default=str))
    return int(status.split()[-1])


async def origins(db: Executor, memory_ids: Sequence[int]) -> dict[int, asyncpg.Record]:
    """memory id -> the DMN item it came from, for the memories that came from one."""
    return {r["memory_id"]: r for r in await db.fetch(_ORIGINS, list(memory_ids))}


async def insights_from_item(db: Executor, item_id: int) -> list[int]:
    """The ids of the memories derived from one DMN item, in id order."""
    rows = await db.fetch("SELECT id FROM memories WHERE metadata->>'dmn_item_id' = $1::text ORDER BY id",
                          str(item_id))
    return [r["id"] for r in rows]
