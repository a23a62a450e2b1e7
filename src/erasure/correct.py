"""The guardian's correction of a memory (issue 39 item 5).

`/correct ID new text` stores the new text as a memory that supersedes the old one
(`memory_supersedes` via 'correction', sql/156), the way a user's update does (via
'update', issue 37): recall ranks the newer first, the model reads the older only as
earlier ("until 28 Nov 2026: …"), `why` names the correction. The new memory takes the
old one's place in the mind's life — its type, speaker, weight (Beta), access history,
utility, protection and the time the fact was said (event time) — so a correction does
not start over as a stranger. The old one is kept as earlier, or forgotten at the
guardian's choice (`forget_old`: src/erasure/forget.py, in a second transaction, after the
correction is stored: a crash between leaves the correction made and the old kept).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import asyncpg
from pgvector import HalfVector

from src.errors import MoltBotError, ProviderError
from src.providers.embedding import Embedder, embed_memories
from src.recall.store import EMBED_MAX_CHARS
from src.text import clean_text

#: What a corrected memory does not inherit: marks of the old text and its consolidation.
_NOT_INHERITED = ("gate_compressed", "recompressed_at", "superseded_by", "superseded_at", "sources",
                  "evaluated_at", "pass_id")

_OLD = """
SELECT id, content, memory_type, source_tag, source_confidence, depth_weight_alpha AS alpha,
       depth_weight_beta AS beta, access_count, last_accessed, access_timestamps, utility_score,
       protected, immutable, event_time, created_at, metadata, conversation_context
  FROM memories WHERE id = $1 FOR UPDATE
"""
_NEW = """
INSERT INTO memories (content, memory_type, embedding, embed_model, depth_weight_alpha, depth_weight_beta,
                      source_tag, source_confidence, access_count, last_accessed, access_timestamps,
                      utility_score, protected, event_time, created_at, metadata, conversation_context)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16::jsonb, $17)
RETURNING id
"""


class CorrectionError(MoltBotError):
    """A correction that cannot be made (no such memory, an immutable one, no text)."""


async def correct(pool: asyncpg.Pool, embedder: Embedder | None, memory_id: int, text: str, *,
                  now: datetime | None = None) -> int:
    """Store `text` as the correction of memory `memory_id`; the new memory's id."""
    now = now or datetime.now(UTC)
    content = clean_text(text).text.strip()
    if not content:
        raise CorrectionError("the corrected text is empty")
    memory_type = await pool.fetchval("SELECT memory_type FROM memories WHERE id = $1", memory_id)
    vector = None
    if embedder is not None and memory_type is not None:
        try:
            vector = HalfVector((await embed_memories(embedder, [content[:EMBED_MAX_CHARS]], [memory_type]))[0])
        except ProviderError:
            vector = None     # stored unembedded: the re-embed worker embeds it
    async with pool.acquire() as conn, conn.transaction():
        old = await conn.fetchrow(_OLD, memory_id)
        if old is None:
            raise CorrectionError(f"no memory #{memory_id}")
        if old["immutable"]:
            raise CorrectionError(f"memory #{memory_id} is immutable (a boundary or seed); edit its layer file")
        if old["content"] == content:
            raise CorrectionError(f"memory #{memory_id} already says that")
        meta = {k: v for k, v in json.loads(old["metadata"] or "{}").items() if k not in _NOT_INHERITED}
        meta["correction_of"] = memory_id
        new_id = await conn.fetchval(
            _NEW, content, old["memory_type"], vector, embedder.model_name if vector is not None else None,
            old["alpha"], old["beta"], old["source_tag"], old["source_confidence"], old["access_count"],
            old["last_accessed"], old["access_timestamps"], old["utility_score"], old["protected"],
            old["event_time"], now, json.dumps(meta, ensure_ascii=False, default=str), old["conversation_context"])
        await conn.execute("INSERT INTO memory_supersedes (insight_id, source_id, via, created_at) "
                           "VALUES ($1, $2, 'correction', $3)", new_id, memory_id, now)
    return new_id
