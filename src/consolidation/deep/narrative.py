"""Narrative synthesis (plan §4.2): a causal story for each cluster of 3+ merged memories.

"I came to value X because of experiences Y and Z." Stored as memory type `narrative`
(prefix "Identity narrative: ") with a supersedes link to the merge insight it
explains, so why_do_i_believe walks narrative → insight → experiences. Narratives get
no special treatment in context assembly: they compete like everything else. Their
insight is not weakened (the narrative explains it, it does not replace it).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from src.consolidation.deep import memories_repository, supersedes_repository
from src.consolidation.deep.derived import write_derived
from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.consolidation.deep.structured import ask_batched, check_one_each, run_guarded
from src.text import excerpt

ITEM_CHARS = 300
MAX_PER_PASS = 12


class Narrative(BaseModel):
    insight_id: int = Field(description="the id of the insight this narrative explains")
    narrative: str = Field(description="one or two sentences, first person: 'I came to ... because ...'")


class Narratives(BaseModel):
    narratives: list[Narrative]


def narrative_prompt(items: Sequence[dict]) -> str:
    parts = ["For each insight below, write a brief causal narrative in the first person that explains "
             "how the experiences led to it: \"I came to value X because of experiences Y and Z.\" "
             "One or two sentences each; use only what the experiences say."]
    for it in items:
        parts.append(f"Insight [{it['id']}]: {excerpt(it['content'], ITEM_CHARS)}")
        parts += [f"  experience: {excerpt(t, ITEM_CHARS)}" for t in it["sources"]]
    return "\n".join(parts)


def validate_narratives(items: Sequence[dict], answer: Narratives) -> None:
    check_one_each({it["id"] for it in items}, {n.insight_id for n in answer.narratives if n.narrative.strip()},
                   answers="narratives", answer="narrative", noun="insight")


async def run(ctx: DeepPassContext) -> PhaseResult:
    """One narrative per merge insight of `narrative_min_size`+ sources that has none yet."""
    result = PhaseResult()
    deep = ctx.settings.deep
    candidates = await supersedes_repository.narrative_candidates(ctx.pool, deep.narrative_min_size, MAX_PER_PASS)
    result.add("candidates", len(candidates))
    if not candidates or not run_guarded(ctx, "narrative"):
        return result
    sources = {r["id"]: r["content"] for r in await memories_repository.memories_by_id(
        ctx.pool, sorted({s for c in candidates for s in c["sources"]}))}
    items = [{"id": c["id"], "content": c["content"], "sources": [sources[s] for s in c["sources"] if s in sources]}
             for c in candidates]
    before = ctx.budget.used
    answers = await ask_batched(ctx, items, batch_size=deep.narrative_batch, question=narrative_prompt,
                                schema=Narratives, validate=validate_narratives,
                                describe=lambda it: {"insight_id": it["id"]})
    result.calls = ctx.budget.used - before
    for _, answer in answers:
        for n in answer.narratives:
            new_id = await write_derived(
                ctx, key=f"narrative:{n.insight_id}", content=" ".join(n.narrative.split()),
                memory_type="narrative", sources=[n.insight_id], via="narrative",
                contradict_sources=False, metadata={"kind": "narrative", "insight_id": n.insight_id})
            if new_id is not None:
                result.add("narratives")
    return result
