"""Step 4 of a cycle (plan §3.5, §3.6): the answer.

System 1 answers within the tool protocol (src/loop/tool_protocol.py: a protocol line
is never the answer); low confidence or a trigger loops once through self-correction,
then escalates to System 2 (src/metacognition/escalation.py). With no model configured,
or when the model fails or runs past the cycle deadline, the reflex reply says why and
lists what the input brings back from memory.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from src.errors import ProviderError
from src.loop.attention import Candidate
from src.loop.degraded import missing_line
from src.loop.prompts import reflex_reply
from src.loop.triggers import turn_triggers
from src.metacognition.calls import fok_once
from src.metacognition.escalation import loop_before_escalate
from src.providers.protocols import ChatMessage
from src.recall.retrieval import Retrieval

log = logging.getLogger("src.loop.cognitive_loop")


@dataclass(frozen=True)
class Thought:
    """What step 4 produced. `outcome` is the escalation outcome (None: no model answered)."""

    answer: str
    path: str
    confidence: float | None = None
    escalated: bool = False
    outcome: Any = None
    tool_actions: list[dict] = field(default_factory=list)


async def think_within_deadline(loop, winner: Candidate, messages: list[ChatMessage], system: str,
                                retrieval: Retrieval | None) -> Thought:
    """One deadline for all model work of the cycle, retries included."""
    deadline = loop.cfg.cycle_deadline_s
    try:
        async with asyncio.timeout(deadline):
            return await think(loop, winner, messages, system, retrieval)
    except TimeoutError:
        log.warning("model work exceeded the cycle deadline of %g s", deadline)
        because = f"the language model did not answer within {deadline:g} s"
        return Thought(reflex_answer(loop, retrieval, because=because), "deadline")


async def think(loop, winner: Candidate, messages: list[ChatMessage], system: str,
                retrieval: Retrieval | None) -> Thought:
    """System 1 with self-correction and escalation; the reflex reply when no model answers."""
    providers = loop.parts.providers
    system1 = providers.system1
    if not system1.configured:
        return Thought(reflex_answer(loop, retrieval), "reflex")
    reading = await loop.parts.threshold.current()
    fok = fok_once(providers.meta or system1, winner.text, settings=loop.settings.metacognition)
    triggers = turn_triggers(loop, winner, retrieval)   # §3.6, once per turn

    async def answer(msgs: list[ChatMessage], prompt: str):   # tool rounds share the FOK call
        return await loop_before_escalate(
            system1, providers.system2, msgs, focus=winner.text, threshold=reading.threshold,
            meta=providers.meta, system=prompt, triggers=triggers, store=loop.parts.store,
            source_tag=winner.source_tag, settings=loop.settings.escalation,
            metacognition=loop.settings.metacognition, keep_corrections=not loop.parts.gates.mode.off,
            fok_source=fok)

    def permit(verb, reply) -> str | None:   # the action check before a tool runs, on the reply's confidence
        allowed, why = loop.actions.allows(verb.kind, winner.source_tag, winner.source_confidence,
                                           reply.confidence.composite)
        return None if allowed else why

    try:
        rounds = await loop.tools.rounds(answer, lambda o: o.answer, messages, system=system, focus=winner.text,
                                         permit=permit)
    except ProviderError as exc:
        # rate limit, outage, open breaker, malformed output: say so, keep the loop going
        log.warning("System 1 failed this cycle: %s", exc)
        return Thought(reflex_answer(loop, retrieval, because=f"the language model failed: {exc}"),
                       "system1_failed")
    tool_actions = [r.action() for r in rounds.results]
    outcome = rounds.answer
    if outcome is None:
        because = ("the language model answered with a tool call instead of words, "
                   "even when asked to answer without tools")
        return Thought(reflex_answer(loop, retrieval, because=because), "tool_protocol_failed",
                       tool_actions=tool_actions)
    if outcome.escalated:
        loop._last_system2 = datetime.now(UTC)
    return Thought(outcome.answer, outcome.path, outcome.confidence.composite, outcome.escalated, outcome,
                   tool_actions)


def reflex_answer(loop, retrieval: Retrieval | None, because: str | None = None) -> str:
    """The reply without a model: why, what is missing, and what recall brings back."""
    # the immutable boundaries are in every context anyway: they are not "brought back".
    # The content, not the one-line `compressed` ("Hello!" says nothing); the same text
    # recalled twice (two memories of one sentence) is shown once.
    # What was just said (working memory, not yet consolidated) comes first.
    learned = ([w.content for w in retrieval.working]
               + [r.hit.content for r in retrieval.memories if not r.hit.immutable]) if retrieval else []
    recalled = list(dict.fromkeys(" ".join(text.split()) for text in learned))[: loop.cfg.reflex_recall_lines]
    return reflex_reply(recalled,
                        said=getattr(loop.parts.providers.system1, "reason", None), because=because,
                        missing=missing_line(loop._missing))
