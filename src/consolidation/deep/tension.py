"""Behavioural contradiction (plan §4.2): does what the mind does match what it values?

For each value/goal-like memory (metadata kind 'value' or 'goal') with center above
0.7, one isolated meta-context call over the mind's recent behaviour (its own words,
source `internal_self`): "The agent claims to value X. Here are recent behavioural
examples. Do any contradict this value?" A contradiction becomes a `tension` memory
("Internal contradiction: …") at the blank-slate Beta(1, 4): no salience bonus, no
emotional charge, no aversive signal; nothing else is weakened. One open tension per
value: while it is open, later calls look for *aligned* behaviour newer than the
tension, which resolves it (metadata resolved = true, the readiness milestone).

Tension fatigue (no LLM): an unresolved tension that surfaced (was retrieved into
context) more than 5 times is marked `acknowledged` — just a memory that says "I
contain this contradiction".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from src.consolidation.deep import memories_repository
from src.consolidation.deep.derived import DerivedMemory, write_derived
from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.consolidation.deep.prompts import TENSION_ITEM_CHARS, TensionAnswer, tension_question
from src.consolidation.deep.structured import BatchQuestion, Rejected, ask_batched, run_guarded
from src.outcomes.tracking import conflict_resolved
from src.text import excerpt


async def run(ctx: DeepPassContext) -> PhaseResult:
    """Tension fatigue, then one call per value over the recent behaviour: a new tension,
    or an open one resolved by behaviour aligned with the value."""
    result = PhaseResult()
    deep = ctx.settings.deep
    result.add("acknowledged", await memories_repository.tension_fatigue(ctx.pool, deep.tension_fatigue_surfaces))
    values = await memories_repository.value_memories(ctx.pool, deep.tension_min_center, deep.tension_max_values)
    result.add("values", len(values))
    if not values:
        return result
    behaviours = await memories_repository.recent_behaviour(ctx.pool, deep.tension_behaviours)
    if not behaviours:
        result.skipped = "no recent behaviour to compare with"
        return result
    if not run_guarded(ctx, "tension"):
        return result
    validate = _citing_only(behaviours)
    for value in values:
        key = f"value:{value['id']}"
        if key in ctx.done:
            continue
        answer = await _judge(ctx, value, behaviours, validate, result)
        if answer is None:
            continue
        open_row = await memories_repository.open_tension(ctx.pool, value["id"])
        if open_row is None and answer.contradicts:
            await _open_tension(ctx, key, value, answer, result)
        else:
            await _resolve_if_aligned(ctx, key, value, answer, open_row, behaviours, result)
    return result


def _citing_only(behaviours: Sequence) -> Callable[[Sequence, TensionAnswer], None]:
    """An answer may cite only the examples it was shown, and a contradiction must cite some."""
    allowed = {b["id"] for b in behaviours}

    def validate(_b: Sequence, ans: TensionAnswer) -> None:
        unknown = sorted((set(ans.contradicting_ids) | set(ans.aligned_ids)) - allowed)
        if unknown:
            raise Rejected(f"the answer cites memory ids not in the input: {unknown}")
        if ans.contradicts and not ans.contradicting_ids:
            raise Rejected("a contradiction was reported without citing the contradicting examples")
    return validate


async def _judge(ctx: DeepPassContext, value, behaviours: Sequence,
                 validate: Callable[[Sequence, TensionAnswer], None], result: PhaseResult) -> TensionAnswer | None:
    """One isolated call: does the recent behaviour contradict `value`, or act on it? None when unanswered."""
    before = ctx.budget.used
    got = await ask_batched(ctx, [value], BatchQuestion(
        question=lambda b: tension_question(b[0]["content"], behaviours), schema=TensionAnswer,
        validate=validate), batch_size=1, describe=lambda v: {"value_id": v["id"]})
    result.calls += ctx.budget.used - before
    return got[0][1] if got else None


async def _open_tension(ctx: DeepPassContext, key: str, value, answer: TensionAnswer, result: PhaseResult) -> None:
    """A contradiction with no tension open: a `tension` memory at the blank slate, announced."""
    why = " ".join(answer.explanation.split()) or "recent behaviour goes against it"
    text = f"I claim to value \"{excerpt(value['content'], TENSION_ITEM_CHARS)}\", yet {why}"
    new_id = await write_derived(
        ctx, DerivedMemory(text, "tension", sources=[], via="insight",
                           metadata={"kind": "tension", "value_id": value["id"],
                                     "behaviour_ids": sorted(set(answer.contradicting_ids)),
                                     "surface_count": 0, "resolved": False, "status": "open"}),
        key=key, inherit_weight=False, contradict_sources=False)
    if new_id is not None:
        result.add("tensions")
        ctx.announce.append(text)


async def _resolve_if_aligned(ctx: DeepPassContext, key: str, value, answer: TensionAnswer, open_row,
                              behaviours: Sequence, result: PhaseResult) -> None:
    """An open tension is resolved by behaviour aligned with the value and newer than the
    tension (no contradiction this time); the value is done for this pass either way."""
    created = {b["id"]: b["created_at"] for b in behaviours}
    aligned_after = [i for i in answer.aligned_ids
                     if open_row is not None and created[i] > open_row["created_at"]]
    resolved = open_row is not None and not answer.contradicts and aligned_after
    async with ctx.pool.acquire() as conn, conn.transaction():
        if resolved:
            await memories_repository.resolve_tension(conn, open_row["id"], ctx.now, sorted(set(aligned_after)))
            result.add("resolved")
        await ctx.mark_done(conn, key)
    if resolved:   # an outcome to link back, and readiness milestone 7 (plan §5.2, §5.3)
        await conflict_resolved(ctx.pool, how="tension resolved by behaviour aligned with the value",
                                memory_ids=[open_row["id"], *sorted(set(aligned_after))], at=ctx.now,
                                evidence={"tension_id": open_row["id"], "value_id": value["id"]})
