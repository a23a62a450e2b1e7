"""After delivery: the exchange kept — the answer through the gate, both sides in the
conversation window, pruning by intensity (plan §3.3, §3.4). Split from the loop so a
failure here is clearly after the reply went out (issue 11: delivered once)."""

from __future__ import annotations

import asyncio
from datetime import datetime

import numpy as np

from src.context.fifo import IntensitySignals, intensity, system2_recency
from src.loop.thought_log import CycleRecord
from src.loop.turns import Turn


async def keep_exchange(loop, record: CycleRecord, turn: Turn, user_text: str, outcome, allocation,
                now: datetime) -> None:
    """The answer through the gate, both sides into the window, pruning."""
    winner, answer, confidence = record.winner, record.output, record.confidence
    answer_buffered = False
    if answer and outcome is not None:
        # the mind's own words go through the same gate as everything else
        kept = await loop.parts.gates.admit(answer, source_tag="internal_self",
                                            source_confidence=round(confidence or 0.5, 3), exchange=False)
        answer_buffered = kept.scratch_id is not None
        loop.parts.gates.exit.note_focus([kept.scratch_id])   # said in this cycle's focus
    # Pruning gives the exit gate a last look only at what the entry gate skipped;
    # what it buffered is judged by the scratch flush already (plan §2.9, §3.3).
    gated = all(p.id in loop._buffered for p in turn.parts)
    for p in turn.parts:
        loop._buffered.discard(p.id)
    await loop.fifo.add("user", user_text, source_tag=winner.source_tag, at=now, metadata={"gated": gated})
    if answer:
        # a reflex reply (outcome None) only lists recall: nothing new to keep
        await loop.fifo.add("assistant", answer, source_tag="internal_self", at=now,
                            metadata={"gated": answer_buffered or outcome is None})
    # "average gate score": how strongly this input engaged memory — the mean weighted
    # recall score of what was retrieved (0 when nothing was).
    retrieval = record.retrieval
    engaged = [m.weighted for m in retrieval.memories] if retrieval else []
    level = intensity(IntensitySignals(
        gate_score=float(np.clip(np.mean(engaged), 0.0, 1.0)) if engaged else 0.0,
        system2_recency=system2_recency(loop._last_system2, now, loop.settings.fifo.system2_half_life_s),
        goal_relevance=float(next((s.components.goal_relevance for s in allocation.ranked), 0.0)),
        emotional_charge=winner.emotional_charge), loop.fifo.settings)
    if winner.embedding is not None:
        loop._recent = (loop._recent + [winner.embedding])[-loop.cfg.recent_context:]
    await loop.fifo.prune(level)


async def after_answer(loop, winner, delivered: bool, *, by_model: bool) -> None:
    """Once the answer is out: credit recalled skills (a model's answer was delivered);
    in copilot, ask the guardian about held memories — after the answer, never in the
    middle of one."""
    if loop.parts.skills is not None:
        await loop.parts.skills.credit_use(delivered and by_model)
    if delivered and winner.source == "user":
        question = loop.parts.gates.confirmation_question()
        if question:
            result = loop.deliver(question)
            if asyncio.iscoroutine(result):
                await result


async def gate_pruned(loop, messages) -> None:
    """Pruned messages get the exit gate before they leave the window (§3.3)."""
    by_tag: dict[str, list] = {}
    for m in messages:
        if not m.metadata.get("gated"):  # a retry after a partial failure skips what passed
            by_tag.setdefault(m.source_tag, []).append(m)
    for tag, group in by_tag.items():
        await loop.parts.gates.prune([m.content for m in group], source_tag=tag)
        for m in group:
            m.metadata["gated"] = True
