"""The bulk import path: staged COPY, then one INSERT … ON CONFLICT per batch.

`python -m src.memory import` writes through here. A batch is one transaction:

1. the keys already stored are looked up first, so a re-run embeds nothing twice;
2. the new rows are embedded the way the store embeds (src/recall/store.py:
   type prefix, RETRIEVAL_DOCUMENT, title = memory type; an embedder failure
   stores rows unembedded for the re-embed worker);
3. COPY into a temporary staging table (COPY cannot skip conflicts), then
   `INSERT INTO memories … SELECT … ON CONFLICT (import_key) DO NOTHING`;
4. supersedes links whose two ends are known are written in the same transaction,
   each with the step that made it (`via`).

A batch with no new row writes nothing and calls no hook: `before_insert` (the
importer drops the HNSW index there) runs only when rows are about to be added,
so a re-run that adds nothing leaves the index alone.

De-duplication: every imported row carries `import_key` (sql/020), the sha256 of
what makes two lines the same memory — the cleaned content, memory type, source
tag, event time, and `created_at` when the line has one (an export does: two
memories the mind stored with the same words at different times stay two). The
unique index makes re-running a file, an overlapping file, or two imports of one
file at the same time insert each memory once. What the mind stored itself has no
key, so importing an export into the store it came from duplicates it (known limit).

Forgotten memories (issue 39): a line whose text is that of a memory the guardian forgot
(its sha256 is in `forgotten_contents`, sql/156) is skipped and counted, unless the
guardian imports with `include_forgotten` — an export made before a forget does not bring
the memory back silently.

A crash mid-import leaves whole batches: the transaction of the batch in flight
rolls back, and the re-run skips what committed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg
from pgvector import HalfVector

from src.providers.protocols import Embedder
from src.recall.store import NewMemory, Prepared, embed_prepared, metadata_json, prepare
from src.text import clean_text


@dataclass(frozen=True)
class ImportRecord:
    """One line of an import file: the memory and what an export adds to it."""

    memory: NewMemory
    line: int                                     # 1-based line number, for messages
    created_at: datetime | None = None
    access_count: int = 0
    last_accessed: datetime | None = None
    access_timestamps: tuple[datetime, ...] = ()
    utility_score: float = 0.0
    ref: int | None = None                        # the id the exporting store gave it
    supersedes: tuple[tuple[int, str], ...] = ()  # (ref, via) of the memories it consolidated
    protected: bool = False                       # /protect: forgetting skips it
    content_contextualized: str | None = None     # contextual retrieval's text (sql/001)
    conversation: str | None = None               # the conversation it is a turn of (src/recall/conversation.py)
    turn: int | None = None                       # its place in that conversation


@dataclass(frozen=True)
class Keyed:
    """A record checked as the store would check it: its import_key and cleaned texts."""

    record: ImportRecord
    key: str
    prepared: Prepared
    metadata: str                                 # metadata_json of the record
    contextualized: str | None


@dataclass
class BatchResult:
    inserted: int = 0
    duplicates: int = 0
    unembedded: int = 0
    links: int = 0
    forgotten: int = 0                            # lines of forgotten memories, skipped


def import_key(content: str, memory_type: str, source_tag: str, event_time: datetime | None,
               created_at: datetime | None) -> str:
    """sha256 of what makes two imported lines the same memory (see the module docstring)."""
    ident = [content, memory_type, source_tag,
             None if event_time is None else event_time.isoformat(),
             None if created_at is None else created_at.isoformat()]
    return hashlib.sha256(json.dumps(ident, ensure_ascii=False).encode()).hexdigest()


_STAGE = """
CREATE TEMP TABLE IF NOT EXISTS memory_import_stage (
    ord INT, content TEXT, memory_type TEXT, embedding halfvec(768), embed_model TEXT,
    alpha FLOAT8, beta FLOAT8, immutable BOOL, source_tag TEXT, source_confidence FLOAT8,
    compressed TEXT, event_time TIMESTAMPTZ, metadata JSONB, created_at TIMESTAMPTZ,
    access_count INT, last_accessed TIMESTAMPTZ, access_timestamps TIMESTAMPTZ[],
    utility_score FLOAT8, import_key TEXT, protected BOOL, content_contextualized TEXT,
    conversation_context TEXT
) ON COMMIT DELETE ROWS
"""
_STAGE_COLUMNS = (
    "ord", "content", "memory_type", "embedding", "embed_model", "alpha", "beta", "immutable",
    "source_tag", "source_confidence", "compressed", "event_time", "metadata", "created_at",
    "access_count", "last_accessed", "access_timestamps", "utility_score", "import_key", "protected",
    "content_contextualized", "conversation_context",
)
_INSERT_STAGED = """
INSERT INTO memories (content, memory_type, embedding, embed_model, depth_weight_alpha,
                      depth_weight_beta, immutable, source_tag, source_confidence, compressed,
                      event_time, metadata, created_at, access_count, last_accessed,
                      access_timestamps, utility_score, import_key, protected, content_contextualized,
                      conversation_context)
SELECT content, memory_type, embedding, embed_model, alpha, beta, immutable, source_tag,
       source_confidence, compressed, event_time, metadata, COALESCE(created_at, now()),
       access_count, last_accessed, access_timestamps, utility_score, import_key, protected,
       content_contextualized, conversation_context
FROM memory_import_stage
ORDER BY ord
ON CONFLICT (import_key) WHERE import_key IS NOT NULL DO NOTHING
"""
_IDS_FOR_KEYS = "SELECT import_key, id FROM memories WHERE import_key = ANY($1::text[])"
_LINK = """
INSERT INTO memory_supersedes (insight_id, source_id, via)
SELECT i, s, v FROM unnest($1::bigint[], $2::bigint[], $3::text[]) AS l(i, s, v) WHERE i <> s
ON CONFLICT DO NOTHING
"""


async def stored_ids(db: asyncpg.Pool | asyncpg.Connection, keys: Sequence[str]) -> dict[str, int]:
    """import_key → memory id for the keys already stored."""
    if not keys:
        return {}
    return {r["import_key"]: r["id"] for r in await db.fetch(_IDS_FOR_KEYS, list(keys))}


def keyed(records: Sequence[ImportRecord]) -> list[Keyed]:
    """Each record with its import_key and its cleaned form (the key is of what is stored).

    Raises InputRejected (naming the line) for a record the store would refuse, its
    metadata included: found per line, a bad record never fails a whole batch.
    """
    out = []
    for r in records:
        where = f"line {r.line}"
        p = prepare(r.memory, where)
        m = p.item
        ctx = None if r.content_contextualized is None else clean_text(r.content_contextualized).text
        out.append(Keyed(r, import_key(p.content, m.memory_type, m.source_tag, m.event_time, r.created_at), p,
                         metadata_json(m.metadata, where), ctx if ctx and ctx.strip() else None))
    return out


def _row(i: int, k: Keyed, vector: HalfVector | None, model: str | None) -> tuple:
    """One staging row (_STAGE_COLUMNS order)."""
    p, r = k.prepared, k.record
    return (i, p.content, p.item.memory_type, vector, model, float(p.item.alpha), float(p.item.beta),
            p.item.immutable, p.item.source_tag, float(p.item.source_confidence), p.item.compressed,
            p.item.event_time, k.metadata, r.created_at, r.access_count, r.last_accessed,
            list(r.access_timestamps), r.utility_score, k.key, r.protected, k.contextualized, p.item.context)


def content_digest(content: str) -> bytes:
    """sha256 of a memory's text, as `forgotten_contents` keeps it (src/erasure/forget.py)."""
    return hashlib.sha256(content.encode("utf-8")).digest()


async def _forgotten(db: asyncpg.Pool, checked: Sequence[Keyed]) -> set[bytes]:
    digests = list({content_digest(k.prepared.content) for k in checked})
    rows = await db.fetch("SELECT digest FROM forgotten_contents WHERE digest = ANY($1::bytea[])", digests)
    return {bytes(r["digest"]) for r in rows}


async def _fresh(db: asyncpg.Pool, checked: Sequence[Keyed], result: BatchResult,
                 include_forgotten: bool = False) -> list[Keyed]:
    """The records whose key is neither stored nor earlier in the batch (the rest count as
    duplicates), nor, unless `include_forgotten`, the text of a forgotten memory."""
    seen: set[str] = set(await stored_ids(db, [k.key for k in checked]))
    forgotten = set() if include_forgotten else await _forgotten(db, checked)
    fresh = []
    for k in checked:
        if forgotten and content_digest(k.prepared.content) in forgotten:
            result.forgotten += 1
        elif k.key in seen:
            result.duplicates += 1
        else:
            seen.add(k.key)
            fresh.append(k)
    return fresh


async def write_batch(pool: asyncpg.Pool, embedder: Embedder, records: Sequence[ImportRecord],
                      ref_ids: dict[int, int],
                      before_insert: Callable[[], Awaitable[None]] | None = None,
                      include_forgotten: bool = False) -> BatchResult:
    """Import `records` in one transaction; see the module docstring.

    `ref_ids` maps export ids to the ids in this store; it is read for supersedes
    links and extended with this batch once it commits. Links to refs not yet known
    are returned to the caller by `pending_links` and written by `write_links` at the end.
    """
    result = BatchResult()
    triples = keyed(records)
    fresh = await _fresh(pool, triples, result, include_forgotten)
    # the vector of a contextualised memory is of its contextualised text (contextual.py)
    vectors, embedded = await embed_prepared(
        embedder, [Prepared(k.contextualized, k.prepared.item) if k.contextualized else k.prepared for k in fresh])
    result.unembedded = len(fresh) - embedded
    rows = [_row(i, k, HalfVector(vectors[i]) if i < embedded else None,
                 embedder.model_name if i < embedded else None) for i, k in enumerate(fresh)]
    if rows and before_insert is not None:
        await before_insert()
    found: dict[int, int] = {}
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(_STAGE)
        if rows:
            await conn.copy_records_to_table("memory_import_stage", records=rows, columns=_STAGE_COLUMNS)
            status = await conn.execute(_INSERT_STAGED)
            result.inserted = int(status.split()[-1])
            # a concurrent import of the same lines got there first: those are duplicates too
            result.duplicates += len(rows) - result.inserted
        ids = await stored_ids(conn, [k.key for k in triples])
        found = {k.record.ref: ids[k.key] for k in triples if k.record.ref is not None and k.key in ids}
        known = {**ref_ids, **found}
        links = [(ids[k.key], known[s], via) for k in triples if k.key in ids
                 for s, via in k.record.supersedes if s in known]
        result.links = await _link(conn, links)
    ref_ids.update(found)                # only what committed
    return result


async def _link(db: asyncpg.Pool | asyncpg.Connection, links: Sequence[tuple[int, int, str]]) -> int:
    if not links:
        return 0
    status = await db.execute(_LINK, [a for a, _, _ in links], [b for _, b, _ in links], [v for _, _, v in links])
    return int(status.split()[-1])


def pending_links(records: Sequence[ImportRecord], ref_ids: dict[int, int]) -> list[tuple[int, int, str]]:
    """(insight ref, source ref, via) links of `records` that write_batch could not resolve yet."""
    return [(r.ref, s, via) for r in records if r.ref is not None for s, via in r.supersedes
            if s not in ref_ids or r.ref not in ref_ids]


async def write_links(pool: asyncpg.Pool, links: Sequence[tuple[int, int, str]], ref_ids: dict[int, int]) -> int:
    """Write supersedes links by export ids once every batch is in; unknown ends are skipped."""
    return await _link(pool, [(ref_ids[a], ref_ids[b], via) for a, b, via in links
                              if a in ref_ids and b in ref_ids])
