"""Re-compression (plan §4.2): gate-time `compressed` lines rewritten with cluster context.

The exit gate compresses a memory from one conversation; here each memory of a merged
cluster or a recorded theme is compressed again next to its related memories, into a
more general line ("prefers simple deployment tooling" → "values simplicity and
pragmatism in tool choices"). The gate's line is kept in metadata.gate_compressed;
`recompressed_at` marks the row so it is not redone every pass.
"""

from __future__ import annotations

from collections.abc import Sequence

from src.consolidation.deep import memories_repository
from src.consolidation.deep.per_item import Item, Pairs, PerItemPhase
from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.consolidation.deep.prompts import Recompressed, recompress_prompt
from src.text import clean_text

CONTEXT_MEMBERS = 4
MAX_CHARS = 200


async def _candidates(ctx: DeepPassContext) -> list:
    """Members of merged clusters and recorded themes not re-compressed yet."""
    return await memories_repository.recompress_candidates(ctx.pool, ctx.settings.deep.recompress_max)


async def _with_related(ctx: DeepPassContext, rows: Sequence) -> list[Item]:
    """Each memory with its gate-time line and a few of its cluster's other members."""
    related_ids = sorted({m for r in rows for m in r["member_ids"]})
    texts = {r["id"]: r for r in await memories_repository.memories_by_id(ctx.pool, related_ids)}
    return [{"id": r["id"], "content": r["content"], "compressed": r["compressed"],
             "source_tag": r["source_tag"], "metadata": r["metadata"],
             "related": [texts[m] for m in r["member_ids"] if m != r["id"] and m in texts][:CONTEXT_MEMBERS]}
            for r in rows]


async def _write(ctx: DeepPassContext, answer: Pairs, result: PhaseResult) -> None:
    """One batch's new lines in one transaction (the gate's line kept in metadata)."""
    ids = [memory_id for memory_id, _ in answer]
    lines = [clean_text(" ".join(text.split())).text[:MAX_CHARS] for _, text in answer]
    async with ctx.pool.acquire() as conn, conn.transaction():
        result.add("recompressed", await memories_repository.update_compressed(conn, ids, lines, ctx.now, ctx.pass_id))


PHASE = PerItemPhase(
    step="recompress", candidates=_candidates, items=_with_related,
    batch_size=lambda ctx: ctx.settings.deep.recompress_batch, question=recompress_prompt, schema=Recompressed,
    pairs=lambda answer: [(c.id, c.compressed) for c in answer.items],
    nouns=("summaries", "summary", "memory"), describe_key="memory_id", write=_write)


async def run(ctx: DeepPassContext) -> PhaseResult:
    """A more general line for each memory of a merged cluster or theme, once."""
    return await PHASE.run(ctx)
