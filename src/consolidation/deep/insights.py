"""Questions and insights (plan §4.2, the two-phase reflection of generative agents).

Phase 1 (`questions`): the ~100 most recent of the user's and the mind's own memories (imported
strangers' only to fill a share, evidence.py), and the themes the light ticker noticed → the 3
most salient high-level questions. Saved with the phase's checkpoint.
Phase 2 (`insights`): each question is a retrieval query (hybrid search, read-only:
consolidation does not count as the mind recalling; the user's statements first, strangers'
lines of one imported conversation only: evidence.py); the model answers with up to 5
insights, each citing the memory ids it rests on. A citation of an id that was not in
the evidence rejects the answer (structured.py). Each insight must then pass
integrity.screen (a statement, no copy of what it cites, a boundary only as its subject,
every citation relevant; refusals are counted `refused_<reason>`). Each piece of evidence
says when it was said, and one a newer statement updated is shown marked earlier, with
its successor beside it (`_evidence`, prompts.insights_prompt). A stored insight is a
`reflection` memory (metadata kind 'insight', via 'insight') with supersedes links to
exactly its cited sources, starting at their mean Beta without boundaries and seeds; the
sources keep their weight (derived.py says why).

A question's validated answer is saved before any insight is written, so a pass killed
half-way resumes writing from the same answer instead of asking again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from src.consolidation.deep import checkpoints, dmn_inputs, evidence
from src.consolidation.deep.insight_store import store_insight
from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.consolidation.deep.prompts import Questions, questions_prompt
from src.consolidation.deep.structured import (
    BatchQuestion,
    Rejected,
    ask_batched,
    ask_insights,
    run_guarded,
)
from src.errors import ProviderError
from src.providers.context_window import most_that_fit
from src.recall.current import successors_missing
from src.recall.search import fetch_hits, search_hybrid

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
    # the user's and the mind's own first; strangers' lines of one conversation fill the rest (evidence.py)
    memories = await evidence.reflection_input(ctx.pool, deep.recent_memories, deep.imported_share)
    if len(memories) < MIN_MEMORIES:
        result.skipped = f"only {len(memories)} memories; need {MIN_MEMORIES}"
        return result
    theme_texts = await evidence.own_themes(ctx.pool, 5)

    def validate(_batch: Sequence, answer: Questions) -> None:
        if not [q for q in answer.questions if q.strip()]:
            raise Rejected("no questions")

    themes = [t for t in theme_texts if t]
    ask = BatchQuestion(question=lambda b: questions_prompt(b[0], themes, deep.questions), schema=Questions,
                        validate=validate, answers_per_item=deep.questions)
    # as many of the newest memories as the model's context window holds (issue 27)
    memories = memories[:max(1, most_that_fit(ctx.llm, len(memories), lambda k: questions_prompt(
        memories[:k], themes, deep.questions), meta=True, schema=Questions, max_tokens=ask.cap([memories])))]
    before = ctx.budget.used
    answers = await ask_batched(ctx, [memories], ask, batch_size=1, describe=lambda m: {"recent_memories": len(m)})
    result.calls = ctx.budget.used - before
    questions = [" ".join(q.split()) for _, a in answers for q in a.questions if q.strip()][:deep.questions]
    result.data["questions"] = questions
    result.add("questions", len(questions))
    return result


async def run_insights(ctx: DeepPassContext) -> PhaseResult:
    """Phase 2: per question, retrieve evidence, ask for cited insights, store those that pass."""
    result = await dmn_inputs.insights_from_dmn(ctx)   # the DMN's waiting associations first (§4.7)
    saved = await checkpoints.phase_result(ctx.pool, ctx.pass_id, "questions") or {}
    questions = (saved.get("data") or {}).get("questions") or []
    if not questions:
        result.skipped = "no questions from phase 1"
        return result
    for qi, question in enumerate(questions):
        answer_key = f"q{qi}:answer"
        if answer_key in ctx.done:
            payload = ctx.done[answer_key]
        else:
            if not run_guarded(ctx, "insights"):
                break
            payload = await _ask(ctx, question, result)
            if payload is None:
                continue
            await ctx.mark_done(ctx.pool, answer_key, payload)
        for j, item in enumerate(payload["insights"]):
            await store_insight(ctx, f"q{qi}:{j}", " ".join(item["insight"].split()), sorted(set(item["cited_ids"])),
                         payload["question"], result)
    return result


async def _evidence(ctx: DeepPassContext, question: str) -> list:
    """The memories a question retrieves (hybrid search, read-only, the own arm on for a
    question about the user), tensions left out, the user's statements first and strangers'
    lines of one imported conversation only, none for a question about the user
    (evidence.user_first, issue 38 item 6); and the
    newer statement that updated any of them which the search missed (as recall joins it,
    src/recall/current.py): evidence that holds only the earlier of two statements invites an
    insight that states it as current (issue 37 item 5)."""
    try:
        qvec = (await ctx.embedder.embed([question], "RETRIEVAL_QUERY"))[0]
    except ProviderError as exc:
        log.warning("deep pass %d: question not embedded, full-text evidence only: %s", ctx.pass_id, exc)
        qvec = None
    model, wanted = ctx.embedder.model_name, ctx.settings.deep.insight_evidence
    hits = await search_hybrid(ctx.pool, question, qvec, embed_model=model, limit=wanted * evidence.SEARCH_DEPTH,
                               w_own=evidence.OWN_WEIGHT if evidence.speaks_of_user(question) else 0.0,
                               now=ctx.now)
    about_user = evidence.speaks_of_user(question)
    hits = evidence.user_first([h for h in hits if h.memory_type not in ("tension",)], wanted,
                               strangers=not about_user)
    hits += await fetch_hits(ctx.pool, successors_missing(hits), qvec, embed_model=model, now=ctx.now)
    return hits


async def _ask(ctx: DeepPassContext, question: str, result: PhaseResult) -> dict | None:
    """The model's validated insights for one question (None: no evidence or no usable answer)."""
    hits = await _evidence(ctx, question)
    if not hits:
        return None
    got, spent = await ask_insights(ctx, question, hits, {"question": question})
    result.calls += spent
    if not got:
        return None
    return {"question": question,
            "insights": [i.model_dump() for i in got[0][1].insights[:ctx.settings.deep.insights_per_question]]}


