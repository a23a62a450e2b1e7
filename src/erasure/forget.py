"""One forget, one transaction (issue 39 items 2, 3 and 7).

    matches (src/erasure/matches.py) → plan the derivations (derived.py) → in one
    transaction: remove the memories, write the re-derived merges, scrub every other
    table (scrub.py), keep the digests (no resurrection by import), write the receipt

A SIGKILL, a crash or a database restart in the middle leaves all or nothing: PostgreSQL
rolls the transaction back. Two forgets never interleave (a transaction-level advisory
lock): the second plans on what the first left. A dry run runs the very same statements
and rolls them back, so its counts are the forget's own.

What the caller's process holds in memory — the identity cache, the conversation window,
copilot's open question — is dropped by the caller from the returned `Forgotten` (a
running mind: src/loop/forgetting.py); another process learns of the forget from the
receipt (src/erasure/receipt.py `newest`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg
from pgvector import HalfVector

from src.erasure import derived, receipt, scrub
from src.erasure.matches import Match
from src.erasure.placeholder import needles, parts
from src.errors import ProviderError
from src.providers.embedding import Embedder, embed_memories
from src.recall.bulk_import import content_digest as digest
from src.recall.store import EMBED_MAX_CHARS

log = logging.getLogger(__name__)

#: pg_advisory_xact_lock key: one forget at a time, whichever process runs it.
FORGET_LOCK = 0x6D6F6C74666F72


@dataclass(frozen=True)
class Forgotten:
    """What a process that holds the mind's state drops at once."""

    memory_ids: list[int]          # every memory removed
    scratch_ids: list[int]         # the scratch rows (and held items) removed
    needles: list[str]             # lower-cased texts: anything in memory holding one goes


class _DryRun(Exception):
    """Raised inside the transaction to roll a dry run back."""


_CONTENTS = "SELECT id, content, memory_type FROM memories WHERE id = ANY($1::bigint[])"
_SCRATCH = "SELECT id FROM scratch_buffer WHERE id = ANY($1::bigint[]) OR EXISTS " \
           "(SELECT 1 FROM unnest($2::text[]) AS n WHERE strpos(lower(content), n) > 0)"


#: The links across removed statements of an update chain (newer → removed → older).
_BRIDGE = """
INSERT INTO memory_supersedes (insight_id, source_id, via, created_at)
SELECT n.insight_id, o.source_id, n.via, n.created_at
  FROM memory_supersedes n JOIN memory_supersedes o ON o.insight_id = n.source_id
 WHERE n.source_id = ANY($1::bigint[]) AND n.via IN ('update', 'correction') AND o.via IN ('update', 'correction')
   AND NOT n.insight_id = ANY($1::bigint[]) AND NOT o.source_id = ANY($1::bigint[])
   AND n.insight_id <> o.source_id
ON CONFLICT DO NOTHING
"""


#: Re-compressions drawn with a removed memory as context (src/consolidation/deep/
#: recompress.py: a merged cluster's or a theme's members, each compressed again beside the
#: others): the gate's own line comes back and the mark goes, so the next deep pass compresses
#: them again from what is left. Before the clusters and findings are removed by the scrub.
_RECOMPRESSED = """
WITH reset AS (
    UPDATE memories m SET compressed = m.metadata->>'gate_compressed',
           metadata = m.metadata - 'recompressed_at' - 'recompressed_by_pass' - 'gate_compressed'
     WHERE m.metadata ? 'recompressed_at' AND NOT m.id = ANY($1::bigint[])
       AND (EXISTS (SELECT 1 FROM consolidation_clusters c
                     WHERE c.member_ids && $1::bigint[] AND m.id = ANY(c.member_ids))
            OR EXISTS (SELECT 1 FROM consolidation_findings f
                        WHERE f.kind = 'theme' AND f.memory_ids && $1::bigint[] AND m.id = ANY(f.memory_ids)))
    RETURNING 1)
SELECT count(*) FROM reset
"""


async def forget(pool: asyncpg.Pool, embedder: Embedder | None, chosen: Sequence[Match], *, who: str,
                 words: str | None = None, also: Sequence[str] = (), dry_run: bool = False,
                 now: datetime | None = None) -> tuple[receipt.Receipt, Forgotten]:
    """Forget `chosen` (memories and lines) and, with `words`, those words wherever they are
    logged; `also`: more texts to scrub wherever they are (a request that named them). The
    receipt (written unless `dry_run`) and what to drop in memory."""
    if who not in receipt.WHO:
        raise ValueError(f"unknown forget origin {who!r}")
    now = now or datetime.now(UTC)
    out = receipt.Receipt(who, now, dry_run=dry_run)
    chosen_ids = sorted({m.id for m in chosen if m.kind == "memory"})
    texts = [m.text for m in chosen] + ([words] if words and words.strip() else []) + [t for t in also if t.strip()]
    forgotten = Forgotten([], [], [])
    try:
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", FORGET_LOCK)
            plan = await derived.plan(conn, chosen_ids)
            rows = await conn.fetch(_CONTENTS, plan.removed)
            found = needles([t for r in rows for t in (r["content"], *parts(r["content"]))]
                            + [t for text in texts for t in (text, *parts(text))])
            vectors = await _embed(embedder, plan.rewrites, dry_run)
            scratch_ids = [r["id"] for r in await conn.fetch(
                _SCRATCH, [m.id for m in chosen if m.kind in ("held", "scratch")], found)]
            out.add("memories", "recompressed_reset", await conn.fetchval(_RECOMPRESSED, plan.removed))
            await _remove(conn, out, plan, vectors, embedder.model_name if embedder is not None else None)
            for table, counts in (await scrub.scrub_tables(conn, found, plan.removed)).items():
                for what, n in counts.items():
                    out.add(table, what, n)
            out.add("memories", "scrubbed", await scrub.scrub_kept_memories(conn, found, plan.removed))
            out.memories, out.rewritten = len(plan.removed), len(plan.rewrites)
            forgotten = Forgotten(plan.removed, scratch_ids, found)
            if dry_run:
                raise _DryRun
            await receipt.write(conn, out)
            await conn.executemany(
                "INSERT INTO forgotten_contents (digest, receipt_id, at) VALUES ($1, $2, $3) "
                "ON CONFLICT (digest) DO NOTHING", [(digest(r["content"]), out.id, now) for r in rows])
    except _DryRun:
        pass
    log.info("forget (%s): %d memories removed, %d merges re-written, %d tables touched%s",
             who, out.memories, out.rewritten, len(out.counts), " (dry run)" if dry_run else "")
    return out, forgotten


async def _embed(embedder: Embedder | None, rewrites: Sequence[derived.Rewrite], dry_run: bool) -> list:
    """Storage vectors of the re-derived merges; None for each when there is no embedder, on a
    dry run, or when it fails (the re-embed worker embeds them later)."""
    if not rewrites or embedder is None or dry_run:
        return [None] * len(rewrites)
    try:
        vecs = await embed_memories(embedder, [r.content[:EMBED_MAX_CHARS] for r in rewrites],
                                    ["reflection"] * len(rewrites))
    except ProviderError as exc:
        log.warning("forget: re-derived merges stored without embeddings (%s)", type(exc).__name__)
        return [None] * len(rewrites)
    return [HalfVector(v) for v in vecs]


async def _remove(conn: asyncpg.Connection, out: receipt.Receipt, plan: derived.Plan,
                  vectors: Sequence, model: str | None) -> None:
    """Delete the removed memories (their links, pairs, outcomes and uses follow by foreign
    key), write the re-derived merges, and free what a removed memory had superseded.

    A removed statement in the middle of an update chain (Tuesday → Thursday → Friday, the
    Thursday forgotten) hands its older statement on to its newer one, so the Tuesday stays
    earlier; a removed newest statement leaves the one before it current again."""
    await conn.execute(_BRIDGE, plan.removed)
    status = await conn.execute("DELETE FROM memories WHERE id = ANY($1::bigint[])", plan.removed)
    out.add("memories", "deleted", int(status.split()[-1]))
    for rw, vec in zip(plan.rewrites, vectors, strict=True):
        await conn.execute(
            """UPDATE memories SET content = $2, embedding = $3, embed_model = $5, compressed = NULL,
                   content_contextualized = NULL, metadata = jsonb_set(metadata, '{sources}', $4::jsonb)
                 WHERE id = $1""", rw.id, rw.content, vec, json.dumps(rw.sources), model if vec is not None else None)
        await conn.execute(
            "DELETE FROM memory_supersedes WHERE insight_id = $1 AND via = 'merge' AND NOT source_id = ANY($2::bigint[])",
            rw.id, rw.sources)
    out.add("memories", "rewritten", len(plan.rewrites))
    await conn.execute(
        """UPDATE memories SET metadata = metadata - 'superseded_by' - 'superseded_at'
            WHERE metadata ? 'superseded_by' AND (metadata->>'superseded_by') ~ '^[0-9]+$'
              AND (metadata->>'superseded_by')::bigint = ANY($1::bigint[])""", plan.removed)
