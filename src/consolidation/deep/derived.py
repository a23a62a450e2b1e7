"""Writing what the deep pass derives: insights, narratives, tensions (plan §4.2).

One derived memory is one transaction: the new row, its `memory_supersedes` links,
the sources' `contradict(0.3)` through the weight choke point (actor
`consolidation`, Phase B rate limit against the center at the pass's first change),
any bookkeeping rows the caller adds, and the unit-of-work mark that keeps a resumed
pass from writing it twice. Originals are never deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import asyncpg
import numpy as np

from src.consolidation.deep import memories_repository, supersedes_repository
from src.consolidation.deep.phase import DeepPassContext
from src.errors import ProviderError
from src.providers.embedding import embed_memories
from src.recall.store import EMBED_MAX_CHARS
from src.text import clean_text
from src.weights.apply import WeightChange, apply_weight_changes

log = logging.getLogger(__name__)

ACTOR = "consolidation"
SOURCE_TAG = "internal_consolidation"
Extra = Callable[[asyncpg.Connection, int], Awaitable[None]]


async def embed_one(ctx: DeepPassContext, content: str, memory_type: str) -> np.ndarray | None:
    """The storage embedding, or None when the embedder fails (the re-embed worker fills it in)."""
    try:
        return (await embed_memories(ctx.embedder, [content[:EMBED_MAX_CHARS]], [memory_type]))[0]
    except ProviderError as exc:
        log.warning("deep pass %d: storing a %s without an embedding: %s", ctx.pass_id, memory_type, exc)
        return None


async def write_derived(
    ctx: DeepPassContext,
    *,
    key: str,
    content: str,
    memory_type: str,
    sources: Sequence[int],
    via: str,
    metadata: Mapping[str, Any],
    inherit_weight: bool = True,
    contradict_sources: bool = True,
    extra: Extra | None = None,
) -> int | None:
    """Store one derived memory with its links and the sources' weight change; its id.

    None when `key` was already done in this pass (a resumed pass) or the text is empty.
    `inherit_weight`: the new memory starts at the mean Beta of its sources (the evidence
    it summarises); otherwise at the blank-slate Beta(1, 4) (tensions: no salience bonus).
    """
    if key in ctx.done:
        return None
    text = clean_text(content).text.strip()
    if not text:
        return None
    vec = await embed_one(ctx, text, memory_type)
    async with ctx.pool.acquire() as conn, conn.transaction():
        rows = await memories_repository.memories_by_id(conn, sources)
        alpha, beta = 1.0, 4.0
        if inherit_weight and rows:
            alpha = float(np.mean([r["alpha"] for r in rows]))
            beta = float(np.mean([r["beta"] for r in rows]))
        meta = {"pass_id": ctx.pass_id, "sources": sorted(r["id"] for r in rows), **metadata}
        new_id = await supersedes_repository.insert_memory(
            conn, content=text, memory_type=memory_type, embedding=vec,
            embed_model=ctx.embedder.model_name, alpha=alpha, beta=beta, source_tag=SOURCE_TAG,
            compressed=None, metadata=meta)
        present = [r["id"] for r in rows]
        await supersedes_repository.insert_links(conn, new_id, present, via)
        if contradict_sources and present and ctx.settings.deep.source_contradict > 0:
            for r in rows:
                ctx.baseline_centers.setdefault(r["id"], r["alpha"] / (r["alpha"] + r["beta"]))
            await apply_weight_changes(conn, [
                WeightChange(mid, "contradict", ctx.settings.deep.source_contradict, ACTOR,
                             f"superseded by {memory_type} #{new_id} ({via})",
                             evidence={"pass_id": ctx.pass_id, "derived_id": new_id, "via": via},
                             cycle_baseline_center=ctx.baseline_centers[mid])
                for mid in present], safety=ctx.safety)
        if extra is not None:
            await extra(conn, new_id)
        await ctx.mark_done(conn, key)
    return new_id
