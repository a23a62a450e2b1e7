"""Think, with tools (plan §3.4 step 4, §3.5, §3.6): the answer.

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
from typing import TYPE_CHECKING

from src.errors import ProviderError
from src.gates.modes import MemoryMode
from src.loop.actions import ActionPolicy
from src.loop.attending import Attended
from src.loop.degraded import Shortfalls
from src.loop.prompting import Prompt
from src.loop.prompts import reflex_reply
from src.loop.settings import LoopSettings
from src.loop.tool_protocol import ToolProtocol
from src.loop.triggers import cycle_triggers
from src.metacognition.calls import fok_once
from src.metacognition.escalation import Outcome, loop_before_escalate
from src.metacognition.settings import EscalationSettings, MetacognitionSettings
from src.metacognition.threshold import EscalationThreshold
from src.providers.protocols import ChatMessage
from src.recall.retrieval import Retrieval
from src.recall.store import MemoryStore
from src.tools.verbs import ToolVerb

if TYPE_CHECKING:   # typing only: the factory pulls in every SDK
    from src.providers.factory import Providers

log = logging.getLogger("src.loop.cognitive_loop")


@dataclass(frozen=True)
class Thought:
    """What thinking produced. `outcome` is the escalation outcome (None: no model answered)."""

    answer: str
    path: str
    confidence: float | None = None
    escalated: bool = False
    outcome: Outcome | None = None
    tool_actions: list[dict] = field(default_factory=list)
    escalated_at: datetime | None = None      # when System 2 answered (the FIFO's System 2 recency)


class Thinking:
    """System 1, self-correction, System 2 and the tool rounds, within the cycle's deadline."""

    def __init__(self, providers: Providers, *, loop: LoopSettings, escalation: EscalationSettings,
                 metacognition: MetacognitionSettings, threshold: EscalationThreshold, store: MemoryStore,
                 mode: MemoryMode, tools: ToolProtocol, policy: ActionPolicy):
        self.cfg = loop
        self.escalation = escalation
        self.metacognition = metacognition
        self.providers = providers
        self.threshold = threshold
        self.store = store
        self.mode = mode
        self.tools = tools
        self.policy = policy

    async def think(self, attended: Attended, prompt: Prompt, retrieval: Retrieval | None,
                    shortfalls: Shortfalls) -> Thought:
        """One deadline (`loop.cycle_deadline_s`) for all model work of the cycle, retries included."""
        deadline = self.cfg.cycle_deadline_s
        try:
            async with asyncio.timeout(deadline):
                return await self._answer(attended, prompt, retrieval, shortfalls)
        except TimeoutError:
            log.warning("model work exceeded the cycle deadline of %g s", deadline)
            because = f"the language model did not answer within {deadline:g} s"
            return Thought(self.reflex_answer(retrieval, shortfalls, because=because), "deadline")

    async def _answer(self, attended: Attended, prompt: Prompt, retrieval: Retrieval | None,
                      shortfalls: Shortfalls) -> Thought:
        """System 1 with self-correction and escalation; the reflex reply when no model answers."""
        if not self.providers.system1.configured:
            return Thought(self.reflex_answer(retrieval, shortfalls), "reflex")
        answer = await self._escalating(attended, retrieval)
        try:
            rounds = await self.tools.rounds(answer, lambda o: o.answer, prompt.messages, system=prompt.system,
                                             focus=attended.winner.text, permit=self._permit(attended))
        except ProviderError as exc:
            # rate limit, outage, open breaker, malformed output: say so, keep the loop going
            log.warning("System 1 failed this cycle: %s", exc)
            return Thought(self.reflex_answer(retrieval, shortfalls, because=f"the language model failed: {exc}"),
                           "system1_failed")
        tool_actions = [r.action() for r in rounds.results]
        outcome = rounds.answer
        if outcome is None:
            because = ("the language model answered with a tool call instead of words, "
                       "even when asked to answer without tools")
            return Thought(self.reflex_answer(retrieval, shortfalls, because=because), "tool_protocol_failed",
                           tool_actions=tool_actions)
        return Thought(outcome.answer, outcome.path, outcome.confidence.composite, outcome.escalated, outcome,
                       tool_actions, escalated_at=datetime.now(UTC) if outcome.escalated else None)

    async def _escalating(self, attended: Attended, retrieval: Retrieval | None):
        """One answer of the tool rounds: System 1 → retry → System 2 (§3.5, §3.6). The
        threshold, the triggers and the FOK call are the turn's: tool rounds share them."""
        providers, cfg, winner = self.providers, self.cfg, attended.winner
        reading = await self.threshold.current()
        fok = fok_once(providers.meta or providers.system1, winner.text, settings=self.metacognition)
        triggers = cycle_triggers(retrieval, offered_kinds=[v.kind for v in self.tools.offered(winner.text)],
                                  focus_vec=winner.embedding, goal_vecs=attended.goal_vecs,
                                  touch_similarity=cfg.trigger_similarity, identity_center=cfg.identity_center)

        async def answer(msgs: list[ChatMessage], system: str) -> Outcome:
            return await loop_before_escalate(
                providers.system1, providers.system2, msgs, focus=winner.text, threshold=reading.threshold,
                meta=providers.meta, system=system, triggers=triggers, store=self.store,
                source_tag=winner.source_tag, settings=self.escalation,
                metacognition=self.metacognition, keep_corrections=not (self.mode.off or winner.unkept),
                fok_source=fok)
        return answer

    def _permit(self, attended: Attended):
        """The action check before a tool runs, on the confidence of the reply carrying the call."""
        winner = attended.winner

        def permit(verb: ToolVerb, reply: Outcome) -> str | None:
            allowed, why = self.policy.allows(verb.kind, winner.source_tag, winner.source_confidence,
                                              reply.confidence.composite)
            return None if allowed else why
        return permit

    def reflex_answer(self, retrieval: Retrieval | None, shortfalls: Shortfalls, because: str | None = None) -> str:
        """The reply without a model: why, what is missing, and what recall brings back."""
        # the immutable boundaries are in every context anyway: they are not "brought back".
        # The content, not the one-line `compressed` ("Hello!" says nothing); the same text
        # recalled twice (two memories of one sentence) is shown once.
        # What was just said (working memory, not yet consolidated) comes first.
        learned = ([w.content for w in retrieval.working]
                   + [r.hit.content for r in retrieval.memories if not r.hit.immutable]) if retrieval else []
        recalled = list(dict.fromkeys(" ".join(text.split()) for text in learned))[
            : self.cfg.reflex_recall_lines]
        return reflex_reply(recalled, said=getattr(self.providers.system1, "reason", None), because=because,
                            missing=shortfalls.line())
