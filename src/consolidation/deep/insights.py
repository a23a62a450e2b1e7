"""Questions and insights (plan §4.2, the two-phase reflection of generative agents).

Phase 1 (`questions`): the ~100 most recent memories (and the themes the light ticker
noticed) → the 3 most salient high-level questions. Saved with the phase's checkpoint.
Phase 2 (`insights`): each question is a retrieval query (hybrid search, read-only:
consolidation does not count as the mind recalling); the model answers with up to 5
insights, each citing the memory ids it rests on. A citation of an id that was not in
the evidence rejects the answer (structured.py). Each insight is a `reflection` memory
(metadata kind 'insight', via 'insight') with supersedes links to exactly its cited
sources, which get contradict(0.3).

A question's validated answer is saved before any insight is written, so a pass killed
half-way resumes writing from the same answer instead of asking again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from src.consolidation.deep import checkpoints
from src.consolidation.deep.derived import write_derived
from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.consolidation.deep.prompts import Insights, Questions, insights_prompt, questions_prompt
from src.consolidation.deep.structured import Rejected, ask_batched, check_citations, run_guarded
from src.consolidation.light import findings_repository
from src.errors import ProviderError
from src.recall.search import search_hybrid

log = logging.getLogger(__name__)

MIN_MEMORIES = 3


async def run_questions(ctx: DeepPassContext) -> PhaseResult:
    """Phase 1: at most `questions` questions, saved in the checkpoint's data."""
    result = PhaseResult()
    deep = ctx.settings.deep
    if not run_guarded(ctx, "questions"):
        result.skipped = ctx.skipped_steps.get("questions", "budget")
        return result
    if not await checkpoints.new_experiences_since_last_pass(ctx.pool, ctx.pass_id):
        # nothing new to reflect on: the same memories would only yield the same insights again
        result.skipped = "no new memories since the last pass"
        return result
    memories = await findings_repository.recent_memories(ctx.pool, deep.recent_memories)
    if len(memories) < MIN_MEMORIES:
        result.skipped = f"only {len(memories)} memories; need {MIN_MEMORIES}"
        return result
    theme_texts = [json.loads(t["details"]).get("label", "") for t in await findings_repository.recent_themes(ctx.pool, 5)]

    def validate(_batch: Sequence, answer: Questions) -> None:
        if not [q for q in answer.questions if q.strip()]:
            raise Rejected("no questions")

    before = ctx.budget.used
    answers = await ask_batched(ctx, [memories], batch_size=1,
                                question=lambda b: questions_prompt(b[0], [t for t in theme_texts if t],
                                                                    deep.questions),
                                schema=Questions, validate=validate,
                                describe=lambda m: {"recent_memories": len(m)})
    result.calls = ctx.budget.used - before
    questions = [" ".join(q.split()) for _, a in answers for q in a.questions if q.strip()][:deep.questions]
    result.data["questions"] = questions
    result.add("questions", len(questions))
    return result


async def run_insights(ctx: DeepPassContext) -> PhaseResult:
    """Phase 2: per question, retrieve evidence, ask for cited insights, store them."""
    result = PhaseResult()
    deep = ctx.settings.deep
    saved = await checkpoints.phase_result(ctx.pool, ctx.pass_id, "questions") or {}
    questions = (saved.get("data") or {}).get("questions") or []
    if not questions:
        result.skipped = "no questions from phase 1"
        return result
    model = ctx.embedder.model_name
    for qi, question in enumerate(questions):
        answer_key = f"q{qi}:answer"
        if answer_key in ctx.done:
            payload = ctx.done[answer_key]
        else:
            if not run_guarded(ctx, "insights"):
                break
            try:
                qvec = (await ctx.embedder.embed([question], "RETRIEVAL_QUERY"))[0]
            except ProviderError as exc:
                log.warning("deep pass %d: question not embedded, full-text evidence only: %s", ctx.pass_id, exc)
                qvec = None
            hits = await search_hybrid(ctx.pool, question, qvec, embed_model=model, limit=deep.insight_evidence,
                                       now=ctx.now)
            hits = [h for h in hits if h.memory_type not in ("tension",)]
            if not hits:
                continue
            allowed = {h.id for h in hits}

            def validate(_b: Sequence, ans: Insights, allowed: set[int] = allowed) -> None:
                if not ans.insights:
                    raise Rejected("no insights")
                for k, item in enumerate(ans.insights):
                    if not item.insight.strip():
                        raise Rejected(f"insight {k} is empty")
                    check_citations(item.cited_ids, allowed, f"insight {k}")

            before = ctx.budget.used
            got = await ask_batched(ctx, [question], batch_size=1,
                                    question=lambda b, hits=hits: insights_prompt(b[0], hits,
                                                                                  deep.insights_per_question),
                                    schema=Insights, validate=validate, describe=lambda q: {"question": q})
            result.calls += ctx.budget.used - before
            if not got:
                continue
            payload = {"question": question,
                       "insights": [i.model_dump() for i in got[0][1].insights[:deep.insights_per_question]]}
            await ctx.mark_done(ctx.pool, answer_key, payload)
        for j, item in enumerate(payload["insights"]):
            text = " ".join(item["insight"].split())
            new_id = await write_derived(
                ctx, key=f"q{qi}:{j}", content=text, memory_type="reflection",
                sources=sorted(set(item["cited_ids"])), via="insight",
                metadata={"kind": "insight", "via": "insight", "question": payload["question"]})
            if new_id is not None:
                result.add("insights")
                ctx.announce.append(text)
    return result
