"""Contextual retrieval (plan §4.6, after Anthropic): a short "who, when, why" per memory.

For the newest memories without `content_contextualized`, one batched model call
per `batch_size` memories (at most `max_calls_per_pass` calls, and the pass's
shared budget) asks for a short context of each, given its session: the
`session_neighbours` memories stored just before it. The stored text is
"<context>\n\n<content>" (context first, as Anthropic prepends it), so the
generated `content_tsv` (which indexes COALESCE(content_contextualized, content))
follows by itself, and the memory is re-embedded from that text in the same
statement. Memories the model gives no context for stay as they are and are
offered again next pass. Offline (no model) the step is skipped and logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

import asyncpg

from src.consolidation.deep import memories_repository as repo
from src.consolidation.deep.phase import CallBudget, DeepPassContext, PhaseResult
from src.consolidation.deep.prompts import ContextBatch, context_prompt
from src.consolidation.evolution.settings import EvolutionSettings, evolution_of
from src.errors import ProviderError
from src.providers.embedding import embed_memories
from src.providers.protocols import Embedder, LanguageModel
from src.recall.store import EMBED_MAX_CHARS
from src.text import clean_text, excerpt

log = logging.getLogger(__name__)



async def run_contextual(pool: asyncpg.Pool, embedder: Embedder, llm: LanguageModel | None,
                         settings: EvolutionSettings, now: datetime, budget: CallBudget,
                         counts: dict[str, int], skip: Callable[[str, str], None],
                         purpose: str = "consolidation:contextual") -> int:
    """Fill `content_contextualized` (and re-embed) for a bounded number of memories; returns how many."""
    cfg = settings.contextual
    if llm is None or not llm.configured:
        skip("contextual retrieval", "no language model is configured")
        return 0
    done = 0
    rows = await repo.lacking_context(pool, cfg.batch_size * cfg.max_calls_per_pass, cfg.session_neighbours,
                                      cfg.context_chars)
    for start in range(0, len(rows), cfg.batch_size):
        if not budget.can_spend():
            skip("contextual retrieval (beyond budget)", "the pass's LLM-call budget is spent")
            break
        batch = rows[start:start + cfg.batch_size]
        try:
            out = await llm.meta_call_structured(context_prompt(batch, cfg.memory_chars), ContextBatch,
                                                 purpose=purpose, max_tokens=80 * len(batch))
        except ProviderError as exc:
            log.warning("contextual retrieval: batch of %d skipped: %s", len(batch), exc)
            budget.spend(1)
            continue
        budget.spend(2 if out.repaired else 1, out.result.tokens_in, out.result.tokens_out)
        by_id = {r["id"]: r for r in batch}
        texts: dict[int, str] = {}
        for item in out.value.contexts:
            context = excerpt(clean_text(item.context).text, cfg.context_chars)
            if item.id in by_id and context:
                texts[item.id] = f"{context}\n\n{by_id[item.id]['content']}"
        if not texts:
            continue
        ids = sorted(texts)
        vectors = None
        try:
            vectors = await embed_memories(embedder, [texts[i][:EMBED_MAX_CHARS] for i in ids],
                                           [by_id[i]["memory_type"] for i in ids])
        except ProviderError as exc:
            log.warning("contextual retrieval: re-embedding failed, text stored, vectors kept: %s", exc)
        done += await repo.write_contextualized(pool, ids, [texts[i] for i in ids], vectors,
                                                embedder.model_name if vectors is not None else None)
    counts["contextualized"] = counts.get("contextualized", 0) + done
    return done


async def run(ctx: DeepPassContext) -> PhaseResult:
    """Deep-pass phase: contextual retrieval (§4.6)."""
    result = PhaseResult()
    used = ctx.budget.used
    await run_contextual(ctx.pool, ctx.embedder, ctx.llm, evolution_of(ctx), ctx.now, ctx.budget,
                         result.counts, ctx.skip, ctx.purpose)
    result.calls = ctx.budget.used - used
    if ctx.llm is None or not ctx.llm.configured:
        result.skipped = "no language model is configured"
    return result
