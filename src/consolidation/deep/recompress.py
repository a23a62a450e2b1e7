"""Re-compression (plan §4.2): gate-time `compressed` lines rewritten with cluster context.

The exit gate compresses a memory from one conversation; here each memory of a merged
cluster or a recorded theme is compressed again next to its related memories, into a
more general line ("prefers simple deployment tooling" → "values simplicity and
pragmatism in tool choices"). The gate's line is kept in metadata.gate_compressed;
`recompressed_at` marks the row so it is not redone every pass.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from src.consolidation.deep import memories_repository
from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.consolidation.deep.structured import ask_batched, check_one_each, run_guarded
from src.text import clean_text, excerpt

ITEM_CHARS = 400
CONTEXT_MEMBERS = 4
MAX_CHARS = 200


class Compressed(BaseModel):
    id: int
    compressed: str = Field(description="one line of at most 15 words, general enough to serve any context")


class Recompressed(BaseModel):
    items: list[Compressed]


def recompress_prompt(items: Sequence[dict]) -> str:
    parts = ["Rewrite the one-line summary of each memory below. Use the related memories to make the line "
             "general (what it says about the agent or the subject), not tied to one conversation. "
             "At most 15 words per line."]
    for it in items:
        parts.append(f"Memory [{it['id']}]: {excerpt(it['content'], ITEM_CHARS)}")
        parts.append(f"  current summary: {it['compressed']}")
        parts += [f"  related: {excerpt(t, ITEM_CHARS)}" for t in it["related"]]
    return "\n".join(parts)


def validate_recompressed(items: Sequence[dict], answer: Recompressed) -> None:
    check_one_each({it["id"] for it in items}, {c.id for c in answer.items if c.compressed.strip()},
                   answers="summaries", answer="summary", noun="memory")


async def run(ctx: DeepPassContext) -> PhaseResult:
    result = PhaseResult()
    deep = ctx.settings.deep
    rows = await memories_repository.recompress_candidates(ctx.pool, deep.recompress_max)
    result.add("candidates", len(rows))
    if not rows or not run_guarded(ctx, "recompress"):
        return result
    related_ids = sorted({m for r in rows for m in r["member_ids"]})
    texts = {r["id"]: r["content"] for r in await memories_repository.memories_by_id(ctx.pool, related_ids)}
    items = [{"id": r["id"], "content": r["content"], "compressed": r["compressed"],
              "related": [texts[m] for m in r["member_ids"] if m != r["id"] and m in texts][:CONTEXT_MEMBERS]}
             for r in rows]
    before = ctx.budget.used
    answers = await ask_batched(ctx, items, batch_size=deep.recompress_batch, question=recompress_prompt,
                                schema=Recompressed, validate=validate_recompressed,
                                describe=lambda it: {"memory_id": it["id"]})
    result.calls = ctx.budget.used - before
    for _, answer in answers:
        ids = [c.id for c in answer.items]
        lines = [clean_text(" ".join(c.compressed.split())).text[:MAX_CHARS] for c in answer.items]
        async with ctx.pool.acquire() as conn, conn.transaction():
            result.add("recompressed", await memories_repository.update_compressed(conn, ids, lines, ctx.now, ctx.pass_id))
    return result
