"""Reconsolidation (plan §4.4): insights meet what came after them.

Conflict-aware (HiMem). A memory of the last `lookback_days` whose nearest live
insight (a `reflection` that supersedes sources) is at least `similarity` close is
screened by the gates' contradiction layers 1–2 (negation heuristic, learned
negation direction; src/gates/contradiction.py). Pairs judged opposed or undecided
go, both texts, to the model, which answers `update` (a rewritten insight: stored
as a new reflection that supersedes the old insight and the new memory; the old
one gets `contradict(superseded_contradict)` and `superseded_by`), or
`productive_contradiction` (both kept; the pair is recorded and not asked again),
or `no_conflict`.

Re-evaluation (EverMemOS). An insight whose sources changed since it was last
evaluated (consolidation wrote a weight change for a source, a source was itself
superseded, or a newer statement of the user updated one: issue 37 item 5) goes to the
model with its sources and their current weights, an updated source marked earlier with
the newer words: `keep` (marked evaluated) or `revise` (a new insight supersedes it, as
above).

A memory a newer statement updated is no new information for the conflict screen: it
held until then (productive_contradictions_repository.conflicting_insights leaves it out).

Findings (issue 40 item 3). The light ticker's contradiction scan records pairs it found
opposed (consolidation_findings kind 'contradiction'); this phase asks each as a conflict
first (`run_findings`) and marks it consumed with what it wrote.

Every model call is bounded (`max_conflicts`, `max_reevaluations` and the pass's
shared call budget). Offline (no model) both steps are skipped and logged.
"""

from __future__ import annotations

import logging
from datetime import datetime

import asyncpg

from src.consolidation.deep import checkpoints, memories_repository, supersedes_repository
from src.consolidation.deep import productive_contradictions_repository as repo
from src.consolidation.deep.integrity import is_question, states_something
from src.consolidation.deep.phase import (
    CallBudget,
    DeepPassContext,
    PhaseResult,
    calls_made,
    interrupts,
)
from src.consolidation.deep.prompts import (
    ConflictAnswer,
    ReevaluationAnswer,
    conflict_prompt,
    reevaluation_prompt,
)
from src.consolidation.evolution.settings import evolution_of
from src.consolidation.light import findings_repository
from src.errors import ContextOverflow, MalformedOutput, ProviderError, ProviderSkipped
from src.gates.contradiction import load_or_learn, screen
from src.outcomes.tracking import conflict_resolved
from src.providers.embedding import embed_memories
from src.providers.protocols import Embedder, LanguageModel
from src.providers.reply_cap import reply_tokens
from src.text import size
from src.weights.apply import WeightChange, apply_weight_changes

log = logging.getLogger(__name__)


def _usable(llm: LanguageModel | None) -> bool:
    return llm is not None and llm.configured


async def _ask(llm: LanguageModel, budget: CallBudget, prompt: str, schema: type, purpose: str):
    """An isolated meta-context call (no history, no identity), as every consolidation call.

    Returns None for a reply that stayed malformed after its repair, or a question over
    the model's window (that item is passed over); any other provider error propagates:
    a skipped capability ends the step (`run`), anything else fails the phase
    (failures.py: the pass backs off and resumes here), after counting the call it cost.
    """
    try:
        out = await llm.meta_call_structured(prompt, schema, purpose=purpose, max_tokens=reply_tokens(schema))
    except (MalformedOutput, ContextOverflow) as exc:
        budget.spend(calls_made(exc))      # a reply and its repair, a cut reply alone; none sent
        log.warning("reconsolidation: an item passed over: %s", exc)
        return None
    except ProviderError as exc:
        budget.spend(calls_made(exc))
        raise
    budget.spend(2 if out.repaired else 1, out.result.tokens_in, out.result.tokens_out)
    return out.value


def _rewrite(answer, verdict: str, counts: dict[str, int]) -> str | None:
    """The rewritten insight of an `update`/`revise` answer, if it states something (a
    question or chatter is never an insight: integrity.states_something)."""
    if answer.verdict != verdict or not answer.insight.strip():
        return None
    text = answer.insight.strip()
    if not states_something(text):
        log.info("reconsolidation: a rewritten insight is not a statement, not stored (%s)", size(text))
        counts["refused_not_statement"] = counts.get("refused_not_statement", 0) + 1
        return None
    return text


async def _supersede(conn: asyncpg.Connection, ctx: DeepPassContext, old_id: int, text: str,
                     source_ids: list[int], why: str, vector) -> int:
    """Store the new insight, link it, and fade the old one, in the caller's transaction."""
    now = ctx.now
    embed_model = ctx.embedder.model_name if vector is not None else None
    new_id = await supersedes_repository.insert_insight(conn, text, vector, embed_model, now,
                                                        {"reconsolidated_from": old_id,
                                                         "evaluated_at": now.isoformat(), "why": why},
                                                        source_ids)
    await memories_repository.mark_metadata(conn, [old_id], {"superseded_by": new_id, "superseded_at": now.isoformat(),
                                              "evaluated_at": now.isoformat()})
    await apply_weight_changes(conn, [WeightChange(
        old_id, "contradict", evolution_of(ctx).reconsolidation.superseded_contradict, "reconsolidation",
        f"superseded by insight {new_id}", {"at": now.isoformat(), "new_insight": new_id, "why": why})],
        safety=ctx.safety)
    return new_id


async def _vector(embedder: Embedder, text: str):
    try:
        return (await embed_memories(embedder, [text], ["reflection"]))[0]
    except ProviderError as exc:
        log.warning("new insight stored without an embedding (the re-embed worker adds it): %s", exc)
        return None


async def run_conflicts(ctx: DeepPassContext, counts: dict[str, int], *, since: datetime | None = None) -> None:
    """Conflict-aware reconsolidation of insights against recent memories.

    The pass's `evolution` settings, model, call budget and skip log are `ctx`'s; its
    model calls carry `ctx.purpose`. `since`: only memories stored after it (the previous
    pass's start), so hourly passes do not screen the same week of memories again and again.
    """
    pool, embedder, llm, now, budget = ctx.pool, ctx.embedder, ctx.llm, ctx.now, ctx.budget
    cfg = evolution_of(ctx).reconsolidation
    if not _usable(llm):
        ctx.skip("reconsolidation (conflicts)", "no language model is configured")
        return
    pairs = await repo.conflicting_insights(pool, now, lookback_days=cfg.lookback_days, similarity=cfg.similarity,
                                            embed_model=embedder.model_name, max_new=cfg.max_new_memories,
                                            limit=cfg.max_conflicts * 4, since=since)
    if not pairs:
        return
    direction = await load_or_learn(pool, embedder)
    asked = 0
    for p in pairs:
        if is_question(p["memory_content"]):
            continue                     # a question states nothing an insight could conflict with
        verdict = screen(p["memory_content"], p["memory_embedding"].to_numpy(), p["insight_content"],
                         p["insight_embedding"].to_numpy(), direction)
        if verdict.contradicts is False:
            continue
        if asked >= cfg.max_conflicts or not budget.can_spend():
            ctx.skip("reconsolidation (conflicts beyond budget)", "the pass's LLM-call budget is spent")
            break
        asked += 1
        answer = await _ask(llm, budget, conflict_prompt(p["insight_content"], p["memory_content"]),
                            ConflictAnswer, ctx.purpose)
        if answer is None:
            counts["reconsolidation_failed"] = counts.get("reconsolidation_failed", 0) + 1
            continue
        if (text := _rewrite(answer, "update", counts)) is not None:
            vector = await _vector(embedder, text)
            async with pool.acquire() as conn, conn.transaction():
                new_id = await _supersede(conn, ctx, p["insight_id"], text, [p["insight_id"], p["memory_id"]],
                                          answer.explanation, vector)
            counts["insights_superseded"] = counts.get("insights_superseded", 0) + 1
            # a conflict resolved by reconsolidation: outcome + readiness milestone 7 (§5.2, §5.3)
            await conflict_resolved(pool, how="insight reconsolidated with a conflicting memory",
                                    memory_ids=[p["insight_id"], p["memory_id"], new_id], at=now,
                                    evidence={"old_insight": p["insight_id"], "new_insight": new_id})
        elif answer.verdict == "productive_contradiction":
            await repo.record_productive_contradiction(pool, p["insight_id"], p["memory_id"], now,
                                                       answer.explanation)
            counts["productive_contradictions"] = counts.get("productive_contradictions", 0) + 1
        else:
            # remembered as judged, so the pair is not asked about again
            await repo.record_productive_contradiction(pool, p["insight_id"], p["memory_id"], now,
                                                       f"no conflict: {answer.explanation}")
            counts["no_conflict"] = counts.get("no_conflict", 0) + 1


async def run_findings(ctx: DeepPassContext, counts: dict[str, int]) -> None:
    """The light ticker's contradiction findings (issue 40 item 3), each asked as a conflict:
    the older memory as what is held, the newer as what came after. `update`: a new reflection
    supersedes both (the older fades as a superseded insight does); otherwise the pair is
    recorded as judged. The finding is marked consumed in the same transaction; a finding
    whose memory is gone is consumed unasked. At most `max_conflicts` a pass."""
    pool, llm, budget = ctx.pool, ctx.llm, ctx.budget
    cfg = evolution_of(ctx).reconsolidation
    if not _usable(llm):
        return
    for f in await findings_repository.open_contradictions(pool, cfg.max_conflicts):
        if f["older_id"] is None or f["older_id"] == f["newer_id"]:
            await findings_repository.consume(pool, f["id"], ctx.pass_id, ctx.now, "memory gone")
            continue
        if not budget.can_spend():
            ctx.skip("reconsolidation (findings beyond budget)", "the pass's LLM-call budget is spent")
            break
        answer = await _ask(llm, budget, conflict_prompt(f["older_content"], f["newer_content"]),
                            ConflictAnswer, ctx.purpose)
        if answer is None:
            counts["reconsolidation_failed"] = counts.get("reconsolidation_failed", 0) + 1
            continue
        text = _rewrite(answer, "update", counts)
        vector = await _vector(ctx.embedder, text) if text is not None else None
        async with pool.acquire() as conn, conn.transaction():
            if text is not None:
                new_id = await _supersede(conn, ctx, f["older_id"], text, [f["older_id"], f["newer_id"]],
                                          answer.explanation, vector)
                outcome = f"update: memory {new_id}"
            else:
                outcome = answer.verdict
                await repo.record_productive_contradiction(conn, f["older_id"], f["newer_id"], ctx.now,
                                                           f"{answer.verdict}: {answer.explanation}")
            await findings_repository.consume(conn, f["id"], ctx.pass_id, ctx.now, outcome)
        counts["findings_consumed"] = counts.get("findings_consumed", 0) + 1


async def run_reevaluation(ctx: DeepPassContext, counts: dict[str, int]) -> None:
    """Re-evaluate insights whose supersedes sources changed (the pass's settings, model,
    call budget and skip log are `ctx`'s, as in `run_conflicts`)."""
    pool, llm, now, budget = ctx.pool, ctx.llm, ctx.now, ctx.budget
    cfg = evolution_of(ctx).reconsolidation
    if not _usable(llm):
        ctx.skip("reconsolidation (re-evaluation)", "no language model is configured")
        return
    for row in await supersedes_repository.insights_with_changed_sources(pool, cfg.max_reevaluations):
        if not budget.can_spend():
            ctx.skip("reconsolidation (re-evaluation beyond budget)", "the pass's LLM-call budget is spent")
            break
        gone = set(await memories_repository.superseded_ids(pool, row["source_ids"]))
        # a source a newer statement updated is shown as earlier, with the newer words
        sources = [(t, c, i in gone, (u, at) if at is not None else None)
                   for i, t, c, u, at in zip(row["source_ids"], row["source_contents"], row["source_centers"],
                                             row["source_updates"], row["source_updated_at"], strict=True)]
        answer = await _ask(llm, budget, reevaluation_prompt(row["content"], sources), ReevaluationAnswer,
                            ctx.purpose)
        if answer is None:
            continue
        if (text := _rewrite(answer, "revise", counts)) is not None:
            vector = await _vector(ctx.embedder, text)
            async with pool.acquire() as conn, conn.transaction():
                await _supersede(conn, ctx, row["id"], text, [row["id"], *row["source_ids"]],
                                 answer.explanation, vector)
            counts["insights_revised"] = counts.get("insights_revised", 0) + 1
        else:
            await memories_repository.mark_metadata(pool, [row["id"]], {"evaluated_at": now.isoformat()})
            counts["insights_kept"] = counts.get("insights_kept", 0) + 1


async def run(ctx: DeepPassContext) -> PhaseResult:
    """Deep-pass phase: conflict-aware reconsolidation and re-evaluation of insights (§4.4)."""
    result = PhaseResult()
    used = ctx.budget.used
    since = await checkpoints.previous_pass_start(ctx.pool, ctx.pass_id)
    if since is not None and since > ctx.now:    # a pass run with an earlier clock (tests, replays)
        since = None
    try:
        await run_findings(ctx, result.counts)
        await run_conflicts(ctx, result.counts, since=since)
        await run_reevaluation(ctx, result.counts)
    except ProviderSkipped as exc:           # not configured, the background budget spent
        if interrupts(exc):
            raise
        ctx.skip(ctx.phase, str(exc))
    result.calls = ctx.budget.used - used
    if ctx.llm is None or not ctx.llm.configured:
        result.skipped = "no language model is configured"
    return result
