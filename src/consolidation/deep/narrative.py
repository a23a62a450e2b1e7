"""Narrative synthesis (plan §4.2): a causal story for each cluster of 3+ merged memories.

"I came to value X because of experiences Y and Z." Stored as memory type `narrative`
(prefix "Identity narrative: ") with a supersedes link to the merge insight it
explains, so why_do_i_believe walks narrative → insight → experiences. Narratives get
no special treatment in context assembly: they compete like everything else. Their
insight is not weakened (the narrative explains it, it does not replace it).
"""

from __future__ import annotations

from collections.abc import Sequence

from src.consolidation.deep import memories_repository, supersedes_repository
from src.consolidation.deep.derived import DerivedMemory, write_derived
from src.consolidation.deep.evidence import speaks_of_user
from src.consolidation.deep.per_item import Item, Pairs, PerItemPhase
from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.consolidation.deep.prompts import Narratives, narrative_prompt

MAX_PER_PASS = 12


async def _candidates(ctx: DeepPassContext) -> list:
    """Merge insights of `narrative_min_size`+ sources that have no narrative yet."""
    return await supersedes_repository.narrative_candidates(ctx.pool, ctx.settings.deep.narrative_min_size,
                                                            MAX_PER_PASS)


async def _with_experiences(ctx: DeepPassContext, candidates: Sequence) -> list[Item]:
    """Each insight with the texts of the experiences it was merged from."""
    sources = {r["id"]: r for r in await memories_repository.memories_by_id(   # rows: each names its speaker
        ctx.pool, sorted({s for c in candidates for s in c["sources"]}))}
    return [{"id": c["id"], "content": c["content"], "sources": [sources[s] for s in c["sources"] if s in sources]}
            for c in candidates]


async def _write(ctx: DeepPassContext, answer: Pairs, result: PhaseResult) -> None:
    """Each narrative a memory of its own, linked to the insight it explains (which stays as it is).
    One that speaks of "the user" when its insight does not is refused (`refused_not_the_users`):
    a 1.5B model turned "Nicolas consistently uses the phrase 'Oh dang that sucks'" into "The
    user consistently uses…" (issue 38 item 6, run G)."""
    insights = {r["id"]: r["content"] for r in await memories_repository.memories_by_id(
        ctx.pool, [i for i, _ in answer])}
    for insight_id, text in answer:
        if speaks_of_user(text) and not speaks_of_user(insights.get(insight_id, "")):
            result.add("refused_not_the_users")
            continue
        new_id = await write_derived(
            ctx, DerivedMemory(" ".join(text.split()), "narrative", sources=[insight_id], via="narrative",
                               metadata={"kind": "narrative", "insight_id": insight_id}),
            key=f"narrative:{insight_id}", contradict_sources=False)
        if new_id is not None:
            result.add("narratives")


PHASE = PerItemPhase(
    step="narrative", candidates=_candidates, items=_with_experiences,
    batch_size=lambda ctx: ctx.settings.deep.narrative_batch, question=narrative_prompt, schema=Narratives,
    pairs=lambda answer: [(n.insight_id, n.narrative) for n in answer.narratives],
    nouns=("narratives", "narrative", "insight"), describe_key="insight_id", write=_write)


async def run(ctx: DeepPassContext) -> PhaseResult:
    """One narrative per merge insight of `narrative_min_size`+ sources that has none yet."""
    return await PHASE.run(ctx)
