"""DMN associations as input of the deep pass's insights (plan §4.7; issue 25).

The DMN's channel 2 ("disparate memory connection → log as insight for consolidation")
and channel 3 ("memory + identity connection → signal for evaluation") write `dmn_items`.
The insights phase takes them first (one call in insights.run_insights): the newest
unconsumed items, at most `deep.questions` a pass, each becomes a question of its own —

    creative   What connects '<first>' and '<second>', N days apart, and what does the
               connection show?                      (src/dmn/prompts.association_question)
    identity   Does '<memory>' confirm, refine or challenge my value '<value>'?
                                                     (src/dmn/prompts.value_question)

— asked like any insights question: the item's own memories first, then what a hybrid
search for the question finds (tensions left out), up to `deep.insight_evidence`; up to
`deep.insights_per_question` cited insights, each through integrity.screen as in
insights.py. An insight from an item carries `dmn_item_id` and `dmn_channel` in its
metadata, which `why` shows (src/consolidation/deep/why.py).

An item is consumed (`consumed_by` 'deep_pass', `outcome` naming the insight ids, its
unconsumed twins with it) once its answer is written — also when the answer was unusable
or its memories are gone, so a bad item is not asked about every pass. An item the
pass could not ask about (no budget, no model, a provider outage) waits for the next
pass; the DMN tick expires what waits longer than `dmn.item_ttl_days`
(src/dmn/generator.py). Resumable like every phase: the answer is saved with its unit
key before any insight is written, and consuming is a unit of its own.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from src.consolidation.deep import memories_repository
from src.consolidation.deep.insight_store import store_insight
from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.consolidation.deep.structured import ask_insights, run_guarded
from src.dmn import repository as dmn_repo
from src.dmn.prompts import association_question, value_question
from src.errors import ProviderError
from src.recall.current import successors_missing
from src.recall.hit import SearchHit
from src.recall.search import fetch_hits, search_hybrid

log = logging.getLogger(__name__)

CHANNELS = ("creative", "identity")
STEP = "dmn associations"
#: Characters of a memory quoted in a question (the DMN's own excerpt length, `dmn.text_chars`).
QUESTION_CHARS = 160


def question_for(item: Mapping[str, Any], memories: Sequence[Mapping[str, Any]]) -> str | None:
    """The item's question, or None when its memories are gone."""
    if item["channel"] == "creative":
        if len(memories) < 2:
            return None
        days = float(_detail(item).get("days_apart", 0.0))
        return association_question(memories[0]["content"], memories[1]["content"], days, QUESTION_CHARS)
    value = _detail(item).get("value")
    if not memories or not value:
        return None
    return value_question(memories[0]["content"], str(value), QUESTION_CHARS)


def _detail(item: Mapping[str, Any]) -> dict:
    detail = item["detail"]
    return json.loads(detail) if isinstance(detail, str) else dict(detail or {})


async def insights_from_dmn(ctx: DeepPassContext) -> PhaseResult:
    """Ask about the waiting DMN items, store what passes, consume them (module docstring)."""
    result = PhaseResult()
    asked: set[tuple] = set()
    for item in await dmn_repo.waiting_items(ctx.pool, CHANNELS, ctx.settings.deep.questions):
        same = (item["channel"], tuple(item["memory_ids"]), _detail(item).get("value"))
        if same in asked:             # a twin: consumed with the first (dmn_repo.consume_item)
            continue
        asked.add(same)
        key = f"dmn{item['id']}:answer"
        if key in ctx.done:
            payload = ctx.done[key]
        else:
            if not run_guarded(ctx, STEP):
                break
            payload = await _ask(ctx, item, result)
            if payload is None:           # nothing was asked: it waits for the next pass
                continue
            await ctx.mark_done(ctx.pool, key, payload)
        for j, insight in enumerate(payload["insights"]):
            await store_insight(ctx, f"dmn{item['id']}:{j}", " ".join(insight["insight"].split()),
                                sorted(set(insight["cited_ids"])), payload["question"], result,
                                counted="dmn_insights",
                                metadata={"dmn_item_id": item["id"], "dmn_channel": item["channel"]})
        await _consume(ctx, item, payload, result)
    return result


async def _evidence(ctx: DeepPassContext, question: str, own: Sequence[Mapping[str, Any]]) -> list[SearchHit]:
    """The item's memories, then what the question retrieves (read-only), tensions left out,
    then the newer statement that updated any of them when it is not there yet. Search hits
    all, so the question shows each one's speaker and date and marks the earlier of two
    statements as such (prompts.insights_prompt; as insights._evidence)."""
    try:
        qvec = (await ctx.embedder.embed([question], "RETRIEVAL_QUERY"))[0]
    except ProviderError as exc:
        log.warning("deep pass %d: DMN question not embedded, full-text evidence only: %s", ctx.pass_id, exc)
        qvec = None
    limit, model = ctx.settings.deep.insight_evidence, ctx.embedder.model_name
    hits = await search_hybrid(ctx.pool, question, qvec, embed_model=model, limit=limit, now=ctx.now)
    out = await fetch_hits(ctx.pool, [m["id"] for m in own], qvec, embed_model=model, now=ctx.now)
    seen = {e.id for e in out}
    out = (out + [h for h in hits if h.memory_type != "tension" and h.id not in seen])[:max(limit, len(own))]
    return out + await fetch_hits(ctx.pool, successors_missing(out), qvec, embed_model=model, now=ctx.now)


async def _ask(ctx: DeepPassContext, item: Mapping[str, Any], result: PhaseResult) -> dict | None:
    """The saved answer for one item; None when nothing could be asked (budget, outage)."""
    deep = ctx.settings.deep
    own = await memories_repository.memories_by_id(ctx.pool, item["memory_ids"])
    question = question_for(item, own)
    if question is None:
        return {"question": None, "insights": [], "reason": "its memories are gone"}
    evidence = await _evidence(ctx, question, own)
    got, spent = await ask_insights(ctx, question, evidence, {"question": question, "dmn_item_id": item["id"]})
    result.calls += spent
    if not got:
        return {"question": question, "insights": [], "reason": "no usable answer"} if spent else None
    return {"question": question,
            "insights": [i.model_dump() for i in got[0][1].insights[:deep.insights_per_question]]}


async def _consume(ctx: DeepPassContext, item: Mapping[str, Any], payload: Mapping[str, Any],
                   result: PhaseResult) -> None:
    """Consume the item (and its twins) with what came of it, once per pass."""
    key = f"dmn{item['id']}:consumed"
    if key in ctx.done:
        return
    async with ctx.pool.acquire() as conn, conn.transaction():
        insight_ids = await dmn_repo.insights_from_item(conn, item["id"])
        outcome = {"pass_id": ctx.pass_id, "question": payload["question"], "insight_ids": insight_ids,
                   **({"reason": payload["reason"]} if payload.get("reason") else {})}
        consumed = await dmn_repo.consume_item(conn, item["id"], by="deep_pass", at=ctx.now, outcome=outcome)
        await ctx.mark_done(conn, key)
    result.add("dmn_items_consumed", consumed)
