"""Writing memories: one at a time (`store`) or in bulk (`store_many`, one COPY).

Every memory is cleaned (src/text.clean_text) and embedded for storage the way plan
§2.1 says: type prefix + content, RETRIEVAL_DOCUMENT, title = memory type; the row
records which model made its vector (`embed_model`), because vectors of different
models are never compared.

When the embedder fails the memory is still written, with `embedding` and
`embed_model` NULL: losing what the agent experienced is worse than a memory that,
until the re-embedding worker fills it in, only the keyword arm of search can find.

The bulk path reserves its ids from the identity sequence first and then COPYs rows
that carry those ids, so the ids come back in input order by construction (COPY
returns nothing, and RETURNING order after INSERT … SELECT is not guaranteed).
COPY FROM always writes the identity values it is given, "like the INSERT option
OVERRIDING SYSTEM VALUE" (PostgreSQL docs, COPY), and the sequence stays ahead of them.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np
from pgvector import HalfVector

from src.errors import InputRejected, ProviderError
from src.providers.embedding import MEMORY_TYPE_PREFIXES, embed_memories
from src.providers.protocols import Embedder
from src.text import clean_text, storable

log = logging.getLogger(__name__)

#: Width of the `memories.embedding halfvec(768)` column.
EMBEDDING_DIMENSIONS = 768
#: Texts per embed call on the bulk path (the Gemini API's batch limit).
EMBED_BATCH = 100
#: Only the first characters of a memory are embedded. gemini-embedding-001 reads
#: 2,048 tokens (~8,000 characters) and a megabyte per text would break the request
#: size limit; the whole content is still stored and full-text indexed.
EMBED_MAX_CHARS = 8000

_COLUMNS = (
    "id", "content", "memory_type", "embedding", "embed_model", "depth_weight_alpha",
    "depth_weight_beta", "immutable", "source_tag", "source_confidence", "compressed",
    "event_time", "metadata", "conversation_context",
)

_INSERT_ONE = """
INSERT INTO memories (content, memory_type, embedding, embed_model, depth_weight_alpha,
                      depth_weight_beta, immutable, source_tag, source_confidence,
                      compressed, event_time, metadata, conversation_context)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb, $13)
RETURNING id
"""

_RESERVE_IDS = """
SELECT nextval(pg_get_serial_sequence('memories', 'id'))
FROM generate_series(1, $1::int)
"""


@dataclass(frozen=True)
class NewMemory:
    """One memory to write; the defaults are a blank-slate episodic memory, Beta(1, 4)."""

    content: str | bytes
    memory_type: str = "episodic"
    source_tag: str = "external_user"
    source_confidence: float = 1.0
    event_time: datetime | None = None
    compressed: str | None = None
    immutable: bool = False
    alpha: float = 1.0
    beta: float = 4.0
    metadata: Mapping[str, Any] | None = field(default=None)
    # the turns before it in its conversation, for finding it (sql/150, src/recall/conversation.py)
    context: str | None = None


@dataclass(frozen=True)
class Prepared:
    """A memory checked and cleaned by `prepare`, ready to embed and write."""

    content: str
    item: NewMemory


def prepare(item: NewMemory, where: str) -> Prepared:
    """Clean and check one memory; InputRejected names the item and what is wrong."""
    cleaned = clean_text(item.content)
    if cleaned.empty:
        raise InputRejected(f"{where}: the memory content is empty (after removing NUL bytes "
                            "and whitespace); nothing was stored")
    if cleaned.notes:
        log.info("%s: content cleaned before storing: %s", where, "; ".join(cleaned.notes))
    if item.memory_type not in MEMORY_TYPE_PREFIXES:
        known = ", ".join(MEMORY_TYPE_PREFIXES)
        raise InputRejected(f"{where}: unknown memory type {item.memory_type!r}; "
                            f"expected one of: {known}")
    if not (0.0 <= item.source_confidence <= 1.0):
        raise InputRejected(f"{where}: source_confidence must be in [0, 1], "
                            f"got {item.source_confidence!r}")
    for name, value in (("alpha", item.alpha), ("beta", item.beta)):
        if not (math.isfinite(value) and value > 0):
            raise InputRejected(f"{where}: {name} must be a finite number > 0, got {value!r}")
    if not item.source_tag:
        raise InputRejected(f"{where}: source_tag must not be empty")
    if item.compressed is not None:
        item = replace(item, compressed=clean_text(item.compressed).text.strip() or None)
    if item.context is not None:
        item = replace(item, context=clean_text(item.context).text.strip() or None)
    return Prepared(cleaned.text, item)


def _clean_json(value: Any) -> Any:
    """Strings in metadata lose NULs and lone surrogates (jsonb refuses both), nothing else."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, Mapping):
        return {_clean_json(k) if isinstance(k, str) else k: _clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean_json(v) for v in value]
    return value


def metadata_json(metadata: Mapping[str, Any] | None, where: str) -> str:
    try:
        return json.dumps(_clean_json(dict(metadata or {})), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InputRejected(f"{where}: metadata is not JSON-serialisable: {exc}") from exc


def _check_vectors(vectors: np.ndarray, n: int, model: str) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.shape != (n, EMBEDDING_DIMENSIONS) or not np.all(np.isfinite(vectors)):
        # a broken embedder must not make the INSERT fail: the caller stores without vectors
        raise ProviderError(f"embedder {model} returned shape {vectors.shape} (or non-finite "
                            f"values) for {n} texts; expected ({n}, {EMBEDDING_DIMENSIONS})",
                            provider=model)
    return vectors


class MemoryStore:
    """The repository that writes `memories` rows; reading lives in src/recall/search.py."""

    def __init__(self, pool: asyncpg.Pool, embedder: Embedder):
        self.pool = pool
        self.embedder = embedder

    async def _embed(self, prepared: Sequence[Prepared]) -> np.ndarray:
        vectors = await embed_memories(
            self.embedder,
            [p.content[:EMBED_MAX_CHARS] for p in prepared],
            [p.item.memory_type for p in prepared],
        )
        return _check_vectors(vectors, len(prepared), self.embedder.model_name)

    async def store(self, item: NewMemory) -> int:
        """Write one memory and return its id.

        Raises InputRejected for empty content or invalid fields (nothing is written).
        An embedder failure (ProviderError) is logged and the row is written unembedded.
        """
        prepared = prepare(item, "memory")
        meta = metadata_json(item.metadata, "memory")
        embedding: np.ndarray | None = None
        model: str | None = None
        try:
            embedding = (await self._embed([prepared]))[0]
            model = self.embedder.model_name
        except ProviderError as exc:
            log.warning("storing a new %s memory without an embedding (the re-embed worker will add "
                        "it): %s", item.memory_type, exc)
        it = prepared.item
        return await self.pool.fetchval(
            _INSERT_ONE, prepared.content, it.memory_type,
            None if embedding is None else HalfVector(embedding), model, float(it.alpha),
            float(it.beta), it.immutable, it.source_tag, float(it.source_confidence),
            it.compressed, it.event_time, meta, it.context,
        )

    async def store_many(self, items: Sequence[NewMemory]) -> list[int]:
        """Write many memories with one COPY; return their ids in input order.

        Every item is checked first; one invalid item rejects the whole batch
        (InputRejected naming its index) and nothing is written. Embedding goes in
        calls of at most EMBED_BATCH texts; after the first failed call the rest of
        the batch is written unembedded too (retrying a provider that is down, call
        after call, would stall a bulk import for minutes).
        """
        if not items:
            return []
        prepared = [prepare(item, f"item {i}") for i, item in enumerate(items)]
        metas = [metadata_json(p.item.metadata, f"item {i}") for i, p in enumerate(prepared)]
        vectors, embedded = await embed_prepared(self.embedder, prepared)
        async with self.pool.acquire() as conn:
            ids = await reserve_memory_ids(conn, len(prepared))
            await copy_memories(conn, ids, prepared,
                                [vectors[i] if i < embedded else None for i in range(len(prepared))],
                                self.embedder.model_name, metas)
        return ids

async def embed_prepared(embedder: Embedder, prepared: Sequence[Prepared]) -> tuple[np.ndarray, int]:
    """Storage vectors for a prefix of `prepared`; returns (vectors, how many were embedded).

    Calls of at most EMBED_BATCH texts; after the first failed call the rest is left
    unembedded (the re-embed worker fills it in): retrying a provider that is down,
    call after call, would stall a bulk write for minutes.
    """
    vectors = np.zeros((len(prepared), EMBEDDING_DIMENSIONS), dtype=np.float32)
    for start in range(0, len(prepared), EMBED_BATCH):
        chunk = prepared[start:start + EMBED_BATCH]
        try:
            found = await embed_memories(embedder, [p.content[:EMBED_MAX_CHARS] for p in chunk],
                                         [p.item.memory_type for p in chunk])
            vectors[start:start + len(chunk)] = _check_vectors(found, len(chunk), embedder.model_name)
        except ProviderError as exc:
            log.warning("embedding failed at item %d of %d; storing items %d..%d without "
                        "embeddings (the re-embed worker will add them): %s",
                        start, len(prepared), start, len(prepared) - 1, exc)
            return vectors, start
    return vectors, len(prepared)


async def reserve_memory_ids(conn: asyncpg.Connection, n: int) -> list[int]:
    """`n` ids from the memories identity sequence, in order, for rows COPY will carry."""
    return [row[0] for row in await conn.fetch(_RESERVE_IDS, n)] if n > 0 else []


async def copy_memories(conn: asyncpg.Connection, ids: Sequence[int], prepared: Sequence[Prepared],
                        vectors: Sequence[np.ndarray | None], embed_model: str,
                        metas: Sequence[str]) -> None:
    """COPY prepared memories carrying reserved `ids` (metadata as `metadata_json` made it),
    on the caller's connection and so inside its transaction. A row gets `embed_model`
    only when it has a vector."""
    records = [
        (memory_id, p.content, p.item.memory_type,
         None if vec is None else HalfVector(vec), None if vec is None else embed_model,
         float(p.item.alpha), float(p.item.beta), p.item.immutable, p.item.source_tag,
         float(p.item.source_confidence), p.item.compressed, p.item.event_time, meta, p.item.context)
        for memory_id, p, vec, meta in zip(ids, prepared, vectors, metas, strict=True)
    ]
    await conn.copy_records_to_table("memories", records=records, columns=_COLUMNS)


async def count_memories(db: asyncpg.Pool | asyncpg.Connection, cap: int) -> int:
    """How many memories there are, counting no further than `cap`.

    Maturity (plan §3.1, §3.5) saturates at `cap` memories, so beyond it the exact
    number does not matter: exact where it counts, and at most `cap` rows read.
    """
    return await db.fetchval("SELECT count(*) FROM (SELECT 1 FROM memories LIMIT $1) AS capped", cap)


class StoreSize:
    """`count_memories` for a per-cycle caller: once the store has reached the cap it stays
    there (memories are not deleted in the normal run), so the count is not read again for
    `recheck_s` seconds. Below the cap every call counts (it reads fewer than `cap` rows).
    Saves a statement a cycle in recall and in each exit-gate chunk."""

    def __init__(self, recheck_s: float = 600.0, clock: Callable[[], float] = time.monotonic):
        self.recheck_s = recheck_s
        self.clock = clock
        self._full: tuple[int, float] | None = None      # (cap, when the store was seen at it)

    async def count(self, db: asyncpg.Pool | asyncpg.Connection, cap: int) -> int:
        if self._full is not None and self._full[0] == cap and self.clock() - self._full[1] < self.recheck_s:
            return cap
        n = await count_memories(db, cap)
        self._full = (cap, self.clock()) if n >= cap else None
        return n
