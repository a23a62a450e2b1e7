"""Contextual retrieval (plan §4.6, after Anthropic): a short "who, when, why" per memory.

For the newest memories without `content_contextualized`, one batched model call
per `batch_size` memories (at most `max_calls_per_pass` calls, and the pass's
shared budget) asks for a short context of each, given its session: the
`session_neighbours` memories stored just before it. The stored text is
"<context>\n\n<content>" (context first, as Anthropic prepends it), so the
generated `content_tsv` (which indexes COALESCE(content_contextualized, content))
follows by itself, and the memory is re-embedded from that text in the same
statement. Memories the model gives no context for (or a batch whose reply stayed
malformed) stay as they are and are offered again next pass; any other provider error
fails the phase (phase.py). Offline (no model) the step is skipped and logged.
"""

from __future__ import annotations

import logging

import asyncpg

from src.consolidation.deep import memories_repository as repo
from src.consolidation.deep.phase import (
    CallBudget,
    DeepPassContext,
    PhaseResult,
    calls_made,
    interrupts,
)
from src.consolidation.deep.prompts import ContextBatch, context_prompt
from src.consolidation.evolution.settings import evolution_of
from src.errors import ContextOverflow, MalformedOutput, ProviderError, ProviderSkipped, ReplyCut
from src.providers.embedding import embed_memories
from src.providers.protocols import Embedder, LanguageModel
from src.providers.reply_cap import reply_tokens
from src.recall.store import EMBED_MAX_CHARS
from src.text import clean_text, excerpt

log = logging.getLogger(__name__)


async def run_contextual(ctx: DeepPassContext, counts: dict[str, int]) -> int:
    """Fill `content_contextualized` (and re-embed) for a bounded number of memories; returns how many.

    The pass's `evolution` settings, model, call budget and skip log are `ctx`'s; its
    model calls carry `ctx.purpose`. A batch over the model's window (ContextOverflow,
    never sent) or whose reply its cap cut (ReplyCut; the cap is sized from the schema and the
    batch, src/providers/reply_cap.py) is asked again in halves; one memory alone waits. A
    batch whose reply stayed malformed waits for the next pass; any other provider error
    fails the phase (phase.py).
    """
    pool, llm, budget = ctx.pool, ctx.llm, ctx.budget
    cfg = evolution_of(ctx).contextual
    if llm is None or not llm.configured:
        ctx.skip("contextual retrieval", "no language model is configured")
        return 0
    done = 0
    rows = await repo.lacking_context(pool, cfg.batch_size * cfg.max_calls_per_pass, cfg.session_neighbours,
                                      cfg.context_chars)
    queue = [rows[i:i + cfg.batch_size] for i in range(0, len(rows), cfg.batch_size)]
    while queue:
        batch = queue.pop(0)
        if not budget.can_spend():
            ctx.skip("contextual retrieval (beyond budget)", "the pass's LLM-call budget is spent")
            break
        try:
            texts = await _contexts(llm, budget, batch, cfg, ctx.purpose, queue)
        except ProviderSkipped as exc:
            if interrupts(exc):
                raise
            ctx.skip("contextual retrieval", str(exc))
            break
        if texts:
            done += await _store(pool, ctx.embedder, batch, texts)
    counts["contextualized"] = counts.get("contextualized", 0) + done
    return done


async def _contexts(llm: LanguageModel, budget: CallBudget, batch: list, cfg, purpose: str,
                    queue: list[list]) -> dict[int, str]:
    """The contextualised text of each memory of `batch` the model gave a context for."""
    try:
        out = await llm.meta_call_structured(context_prompt(batch, cfg.memory_chars), ContextBatch,
                                             purpose=purpose, max_tokens=reply_tokens(ContextBatch, len(batch)))
    except (ContextOverflow, ReplyCut) as exc:
        # over the window (not sent) or cut at its cap (not repaired): fewer at a time
        budget.spend(calls_made(exc))
        if len(batch) > 1:
            queue[:0] = [batch[:len(batch) // 2], batch[len(batch) // 2:]]
        else:
            log.warning("contextual retrieval: memory %d waits for the next pass: %s", batch[0]["id"], exc)
        return {}
    except MalformedOutput as exc:
        log.warning("contextual retrieval: batch of %d skipped (offered again next pass): %s", len(batch), exc)
        budget.spend(calls_made(exc))
        return {}
    except ProviderError as exc:
        budget.spend(calls_made(exc))
        raise
    budget.spend(2 if out.repaired else 1, out.result.tokens_in, out.result.tokens_out)
    by_id = {r["id"]: r for r in batch}
    texts: dict[int, str] = {}
    for item in out.value.contexts:
        context = excerpt(clean_text(item.context).text, cfg.context_chars)
        if item.id in by_id and context:
            texts[item.id] = f"{context}\n\n{by_id[item.id]['content']}"
    return texts


async def _store(pool: asyncpg.Pool, embedder: Embedder, batch: list, texts: dict[int, str]) -> int:
    """Write the texts, re-embedded when the embedder answers (else the old vectors stay)."""
    by_id = {r["id"]: r for r in batch}
    ids = sorted(texts)
    vectors = None
    try:
        vectors = await embed_memories(embedder, [texts[i][:EMBED_MAX_CHARS] for i in ids],
                                       [by_id[i]["memory_type"] for i in ids])
    except ProviderError as exc:
        log.warning("contextual retrieval: re-embedding failed, text stored, vectors kept: %s", exc)
    return await repo.write_contextualized(pool, ids, [texts[i] for i in ids], vectors,
                                           embedder.model_name if vectors is not None else None)


async def run(ctx: DeepPassContext) -> PhaseResult:
    """Deep-pass phase: contextual retrieval (§4.6)."""
    result = PhaseResult()
    used = ctx.budget.used
    await run_contextual(ctx, result.counts)
    result.calls = ctx.budget.used - used
    if ctx.llm is None or not ctx.llm.configured:
        result.skipped = "no language model is configured"
    return result
