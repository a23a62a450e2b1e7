"""Writing what the deep pass derives: insights, narratives, tensions (plan §4.2).

One derived memory is one transaction: the new row, its `memory_supersedes` links,
for a merge the sources' `contradict(0.3)` through the weight choke point (actor
`consolidation`, Phase B rate limit against the center at the pass's first change),
any bookkeeping rows the caller adds, and the unit-of-work mark that keeps a resumed
pass from writing it twice. Originals are never deleted.

Only a merge lowers its sources (plan §4.2: near-duplicates give way so the merged
memory surfaces first). An insight drawn from evidence does not replace it: with a real
model an insight citing the user's fact lowered that fact's center (issue 27; notes.md,
"Insights cannot launder weight"), so the mind's reading of a fact outweighed the fact
itself.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import numpy as np

from src.consolidation.deep import memories_repository, supersedes_repository
from src.consolidation.deep.integrity import BLANK_PRIOR, evidence_prior, is_seed
from src.consolidation.deep.phase import DeepPassContext
from src.errors import ProviderError
from src.providers.embedding import embed_memories
from src.recall.store import EMBED_MAX_CHARS, NewMemory
from src.text import clean_text
from src.weights.apply import WeightChange, apply_weight_changes

log = logging.getLogger(__name__)

ACTOR = "consolidation"
SOURCE_TAG = supersedes_repository.SOURCE_TAG
Extra = Callable[[asyncpg.Connection, int], Awaitable[None]]


async def embed_one(ctx: DeepPassContext, content: str, memory_type: str) -> np.ndarray | None:
    """The storage embedding, or None when the embedder fails (the re-embed worker fills it in)."""
    try:
        return (await embed_memories(ctx.embedder, [content[:EMBED_MAX_CHARS]], [memory_type]))[0]
    except ProviderError as exc:
        log.warning("deep pass %d: storing a %s without an embedding: %s", ctx.pass_id, memory_type, exc)
        return None


@dataclass(frozen=True)
class DerivedMemory:
    """One memory the deep pass derives: text, type, the memories it rests on, the step (`via`), metadata."""

    content: str
    memory_type: str
    sources: Sequence[int]
    via: str
    metadata: Mapping[str, Any]


async def write_derived(
    ctx: DeepPassContext,
    derived: DerivedMemory,
    *,
    key: str,
    inherit_weight: bool = True,
    contradict_sources: bool = True,
    extra: Extra | None = None,
) -> int | None:
    """Store one derived memory with its links and the sources' weight change; its id.

    None when `key` was already done in this pass (a resumed pass) or the text is empty.
    `inherit_weight`: the new memory starts at the mean Beta of its sources (the evidence
    it summarises), boundaries and seeds left out (integrity.evidence_prior); otherwise
    at the blank-slate Beta(1, 4) (tensions: no salience bonus). `contradict_sources`:
    the sources give way to it (a merge supersedes its near-duplicates; an insight drawn
    from evidence does not replace it, so insights pass False).
    """
    memory_type, via = derived.memory_type, derived.via
    if key in ctx.done:
        return None
    text = clean_text(derived.content).text.strip()
    if not text:
        return None
    vec = await embed_one(ctx, text, memory_type)
    async with ctx.pool.acquire() as conn, conn.transaction():
        rows = await memories_repository.memories_by_id(conn, derived.sources)
        alpha, beta = evidence_prior(rows) if inherit_weight else BLANK_PRIOR
        meta = {"pass_id": ctx.pass_id, "sources": sorted(r["id"] for r in rows), **derived.metadata}
        new_id = await supersedes_repository.insert_memory(
            conn, NewMemory(text, memory_type, source_tag=SOURCE_TAG, alpha=alpha, beta=beta, metadata=meta),
            embedding=vec, embed_model=ctx.embedder.model_name)
        await supersedes_repository.insert_links(conn, new_id, [r["id"] for r in rows], via)
        # seeds keep their weight anyway (the choke point refuses): not even asked
        giving_way = [r for r in rows if not is_seed(r)] if contradict_sources else []
        if giving_way and ctx.settings.deep.source_contradict > 0:
            for r in giving_way:
                ctx.baseline_centers.setdefault(r["id"], r["alpha"] / (r["alpha"] + r["beta"]))
            await apply_weight_changes(conn, [
                WeightChange(r["id"], "contradict", ctx.settings.deep.source_contradict, ACTOR,
                             f"superseded by {memory_type} #{new_id} ({via})",
                             evidence={"pass_id": ctx.pass_id, "derived_id": new_id, "via": via},
                             cycle_baseline_center=ctx.baseline_centers[r["id"]])
                for r in giving_way], safety=ctx.safety)
        if extra is not None:
            await extra(conn, new_id)
        await ctx.mark_done(conn, key)
    return new_id
