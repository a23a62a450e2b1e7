"""Think, with tools (plan §3.4 step 4, §3.5, §3.6): the answer.

System 1 answers within the tool protocol (src/loop/tool_protocol.py: a protocol line
is never the answer); low confidence or a trigger loops once through self-correction,
then escalates to System 2 (src/metacognition/escalation.py). With no model configured,
or when the model fails or runs past the cycle deadline without having answered, the
reflex reply says why and lists what the input brings back from memory.

Timing (issue 27). One deadline bounds the cycle's model work (`cycle_deadline`: set, or
derived from the models' own timeouts); an answer that arrived before it is never thrown
away because a later step (the FOK call, the retry, System 2) ran late: the best one so
far is the thought (src/loop/arrivals.py). The user comes first: the calls of a user's
turn say so (`caller_for`, src/providers/caller.py) and go first at every model endpoint
(src/providers/endpoint_gate.py); an impulse's calls count against the background budget
under its source's name. A thought of the mind's own (DMN, consolidation,
gut) gives way as soon as a user message arrives (`yield_to_user`) or is already
waiting: it ends without an answer and the user's turn is next.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from src.db.deferred import Deferred
from src.errors import ProviderError
from src.gates.modes import MemoryMode
from src.gates.utterance import classify
from src.loop.action_policy import ActionPolicy
from src.loop.arrivals import Arrivals, TurnFok, late_outcome
from src.loop.attending import Attended
from src.loop.composing import Prompt
from src.loop.degraded import Shortfalls
from src.loop.just_said import Said, bearing_on
from src.loop.parts import LoopSections
from src.loop.prompts import DEFECT_WORDS, acknowledgement, reflex_reply, tool_found
from src.loop.speaker_check import said_to_user, users_lines
from src.loop.tool_protocol import ToolProtocol
from src.loop.triggers import cycle_triggers
from src.metacognition.answer_form import (
    Defect,
    about_itself,
    exchanges,
    form_defect,
)
from src.metacognition.escalation import (
    Asking,
    EscalationOutcome,
    Recording,
    Scoring,
    loop_before_escalate,
)
from src.metacognition.threshold import EscalationThreshold
from src.providers.caller import INTERNAL, Caller, caller_for
from src.providers.protocols import ChatMessage, LanguageModel
from src.recall.retrieval import Retrieval
from src.recall.store import MemoryStore
from src.recall.when import memory_time, said_when, the_date
from src.tools.verbs import ToolVerb

if TYPE_CHECKING:   # typing only: the factory pulls in every SDK
    from src.providers.factory import Providers

log = logging.getLogger(__name__)

#: The deadline without a language model (reflex mode: nothing to wait for).
NO_MODEL_DEADLINE_S = 20.0


@dataclass(frozen=True)
class Thought:
    """What thinking produced. `outcome` is the escalation outcome (None: no model answered)."""

    answer: str
    path: str
    confidence: float | None = None
    escalated: bool = False
    outcome: EscalationOutcome | None = None
    tool_actions: list[dict] = field(default_factory=list)
    escalated_at: datetime | None = None      # when System 2 answered (the FIFO's System 2 recency)
    writes: tuple[Deferred, ...] = ()         # the escalation decisions' rows, not yet written


def cycle_deadline(configured: float | None, system1: LanguageModel, system2: LanguageModel) -> float:
    """Seconds the model work of one cycle may take: `loop.cycle_deadline_s` when set, else
    System 1's whole timeout for the first answer plus the longer of System 1's and System
    2's for one later step (the retry or the escalation). The models' timeouts are their
    provider kinds' `providers.llm.timeout_s` (a cloud API: seconds; a local model: minutes)."""
    first = getattr(system1, "timeout_s", None)
    if configured is not None:
        if first is not None and configured < first:    # said, not warned: the default does it for a local model
            log.info("loop.cycle_deadline_s (%g s) is shorter than System 1's timeout (%g s): an answer "
                     "slower than that is cut (set it higher for a slow local model)", configured, first)
        return configured
    if first is None:
        return NO_MODEL_DEADLINE_S
    return first + max(first, getattr(system2, "timeout_s", None) or first)


@dataclass
class _ModelWork:
    """The model work of one turn in flight: what arrived, its FOK call, its threshold, and
    the escalation rows of its answers (one per tool round), handed back with the thought."""

    arrivals: Arrivals
    fok: TurnFok
    caller: Caller = INTERNAL              # whose calls: the user's turn's, or an impulse's
    threshold: float = 0.0
    now: datetime | None = None            # the cycle's now (the reflex reply's dates)
    writes: list[Deferred] = field(default_factory=list)


class Thinking:
    """System 1, self-correction, System 2 and the tool rounds, within the cycle's deadline."""

    def __init__(self, providers: Providers, settings: LoopSections, *, threshold: EscalationThreshold,
                 store: MemoryStore, mode: MemoryMode, tools: ToolProtocol, policy: ActionPolicy,
                 user_waiting: Callable[[], int] | None = None):
        loop = settings.loop
        self.cfg = loop
        self.escalation = settings.metacognition.escalation
        self.metacognition = settings.metacognition
        self.providers = providers
        self.threshold = threshold
        self._reflex_told = False     # the reflex reason was said to the user this session
        self.store = store
        self.mode = mode
        self.tools = tools
        self.policy = policy
        self.user_waiting = user_waiting or (lambda: 0)
        self.deadline_s = cycle_deadline(loop.cycle_deadline_s, providers.system1, providers.system2)
        self._internal: asyncio.Timeout | None = None     # the deadline of a thought of the mind's own
        self._yielded = False

    def yield_to_user(self) -> None:
        """A user message arrived: a thought of the mind's own being thought ends now."""
        scope = self._internal
        if scope is None or self._yielded or scope.expired():
            return
        self._yielded = True
        log.info("the mind's own thought gives way to the user's message")
        scope.reschedule(asyncio.get_running_loop().time())

    async def think(self, attended: Attended, prompt: Prompt, retrieval: Retrieval | None,
                    shortfalls: Shortfalls, now: datetime | None = None) -> Thought:
        """All model work of the cycle (answer, FOK, retry, System 2, tool rounds) within
        `deadline_s`; at the deadline the best answer that arrived. A user's turn goes first at
        every endpoint; the mind's own thought gives way to a user message (no answer)."""
        user = attended.winner.source == "user"
        if not user and self.user_waiting():
            return self._gave_way("a user message is waiting")
        caller = caller_for(attended.winner.source)
        turn = _ModelWork(Arrivals(self.tools.contains_call),
                     TurnFok(self.providers.meta or self.providers.system1, attended.winner.text, self.metacognition,
                             caller), caller=caller, now=now)
        try:
            async with asyncio.timeout(self.deadline_s) as scope:
                self._internal = None if user else scope
                try:
                    thought = await self._answer(attended, prompt, retrieval, shortfalls, turn)
                finally:
                    self._internal = None
        except TimeoutError:
            thought = (self._gave_way("a user message arrived") if self._yielded
                       else self._late(turn, retrieval, shortfalls))
        finally:
            self._yielded = False
            await turn.fok.cancel()    # a FOK call still running would hold a one-slot endpoint
        return replace(thought, writes=tuple(turn.writes))

    def _gave_way(self, why: str) -> Thought:
        log.info("the mind's own thought is left unanswered: %s", why)
        return Thought("", "gave_way")

    def _late(self, turn: _ModelWork, retrieval: Retrieval | None, shortfalls: Shortfalls) -> Thought:
        """The deadline came first: the best answer that arrived, else the reflex reply."""
        log.warning("model work exceeded the cycle deadline of %g s", self.deadline_s)
        outcome = late_outcome(turn.arrivals, turn.fok.known(), threshold=turn.threshold,
                               why=f"the cycle deadline of {self.deadline_s:g} s came first",
                               settings=self.metacognition)
        if outcome is None:
            because = f"the language model did not answer within {self.deadline_s:g} s"
            return Thought(self.reflex_answer(retrieval, shortfalls, because=because, now=turn.now), "deadline")
        log.info("using the answer that arrived before the deadline (%s)", outcome.path)
        return Thought(outcome.answer, outcome.path, outcome.confidence.composite, outcome.escalated, outcome,
                       escalated_at=datetime.now(UTC) if outcome.escalated else None)

    async def _answer(self, attended: Attended, prompt: Prompt, retrieval: Retrieval | None,
                      shortfalls: Shortfalls, turn: _ModelWork) -> Thought:
        """System 1 with self-correction and escalation; the reflex reply when no model answers."""
        if not self.providers.system1.configured:
            # the reason once a session, to the user; after that the reply only names the mode
            to_user = attended.winner.source == "user"
            reply = self.reflex_answer(retrieval, shortfalls, now=turn.now, brief=to_user and self._reflex_told,
                                       just_said=just_said(attended, prompt) if to_user else ())
            self._reflex_told = self._reflex_told or to_user
            return Thought(reply, "reflex")
        answer = await self._escalating(attended, retrieval, turn)
        try:
            rounds = await self.tools.rounds(answer, lambda o: o.answer, prompt.messages, system=prompt.system,
                                             focus=attended.winner.text, permit=self._permit(attended))
        except ProviderError as exc:
            # rate limit, outage, open breaker, malformed output: say so, keep the loop going
            log.warning("System 1 failed this cycle: %s", exc)
            return Thought(self.reflex_answer(retrieval, shortfalls, because=f"the language model failed: {exc}",
                                              now=turn.now),
                           "system1_failed")
        tool_actions = [r.action() for r in rounds.results]
        outcome = rounds.answer
        if outcome is not None and not outcome.answer.strip():
            # every user message gets an answer in words: an empty one (a small model's bare
            # "Confidence:" line, retried and still empty) is said as a failure, never printed as
            # nothing; a statement of the user's is acknowledged in its words
            if self._statement(attended):
                return Thought(acknowledgement(attended.winner.text), "acknowledged", tool_actions=tool_actions)
            return Thought(self.reflex_answer(retrieval, shortfalls, now=turn.now,
                                              because="the language model answered with no words"),
                           "empty_answer", tool_actions=tool_actions)
        if outcome is None:
            found = next((r for r in reversed(rounds.results) if not r.refused and r.text.strip()), None)
            if found is not None and attended.winner.source == "user":
                # the model kept calling instead of answering, but its call found something: the
                # user asked for it ("How do I brew my tea?" -> RECALL_SKILL, a 1.5B model twice)
                log.info("the model answered with tool calls only; its last result is the reply")
                return Thought(tool_found(found.call.line, found.text), "tool_result", tool_actions=tool_actions)
            because = ("the language model answered with a tool call instead of words, "
                       "even when asked to answer without tools")
            return Thought(self.reflex_answer(retrieval, shortfalls, because=because, now=turn.now), "tool_protocol_failed",
                           tool_actions=tool_actions)
        earlier = exchanges(prompt.messages) if attended.winner.source == "user" else ()
        if (defect := form_defect(outcome.answer, focus=attended.winner.text, earlier=earlier)) is not None:
            return self._instead_of(defect, attended, retrieval, shortfalls, turn, tool_actions)
        # in a reply to the user; a thought of its own may take up what the user holds (a value it forms)
        if attended.winner.source == "user":
            said = said_to_user(outcome.answer, attended.winner.text, users_lines(prompt.messages, retrieval))
            outcome = replace(outcome, answer=said) if said != outcome.answer else outcome
            if (defect := about_itself(outcome.answer, attended.winner.text)) is not None:
                return self._instead_of(defect, attended, retrieval, shortfalls, turn, tool_actions)
        return Thought(outcome.answer, outcome.path, outcome.confidence.composite, outcome.escalated, outcome,
                       tool_actions, escalated_at=datetime.now(UTC) if outcome.escalated else None)

    def _instead_of(self, defect: Defect, attended: Attended, retrieval: Retrieval | None, shortfalls: Shortfalls,
                    turn: _ModelWork, tool_actions: list[dict]) -> Thought:
        """The retry and System 2 still gave no answer (a refusal, talk about itself, markup,
        a repeat: src/metacognition/answer_form.py): it is never delivered nor stored as the
        mind's words. A statement of the user's is acknowledged in its own words; anything
        else gets the reflex reply saying why, with what recall brings back."""
        log.info("the model's answer was no answer (%s: %r); not delivered", defect.kind, defect.detail)
        if self._statement(attended):
            return Thought(acknowledgement(attended.winner.text), "acknowledged", tool_actions=tool_actions)
        because = f"the language model's answer was {DEFECT_WORDS[defect.kind]}"
        return Thought(self.reflex_answer(retrieval, shortfalls, because=because, now=turn.now), "no_answer",
                       tool_actions=tool_actions)

    @staticmethod
    def _statement(attended: Attended) -> bool:
        """The turn is one statement of the user's (what `acknowledgement` answers)."""
        winner = attended.winner
        return winner.source == "user" and not attended.turn.combined and classify(winner.text).kind == "statement"

    async def _escalating(self, attended: Attended, retrieval: Retrieval | None, turn: _ModelWork):
        """One answer of the tool rounds: System 1 → retry → System 2 (§3.5, §3.6). The
        threshold, the triggers and the FOK call are the turn's: tool rounds share them.
        The models are watched: what they answer is kept for the deadline (`_late`)."""
        providers, cfg, winner = self.providers, self.cfg, attended.winner
        reading = await self.threshold.current()
        turn.threshold = reading.threshold
        triggers = cycle_triggers(retrieval, offered_kinds=[v.kind for v in self.tools.offered(winner.text)],
                                  focus_vec=winner.embedding, goal_vecs=attended.goal_vecs,
                                  touch_similarity=cfg.trigger_similarity, identity_center=cfg.identity_center)

        scoring = Scoring(settings=self.escalation, metacognition=self.metacognition)
        recording = Recording(self.store, source_tag=winner.source_tag,
                              keep_corrections=not (self.mode.off or winner.unkept), deferred=True)

        async def answer(msgs: list[ChatMessage], system: str) -> EscalationOutcome:
            outcome = await loop_before_escalate(
                providers.system1, providers.system2, msgs, focus=winner.text, threshold=reading.threshold,
                asking=Asking(system=system, triggers=triggers, meta=providers.meta, fok_source=turn.fok,
                              arrivals=turn.arrivals, caller=turn.caller, retry=reading.retry_pays),
                scoring=scoring, recording=recording)
            turn.writes.extend(outcome.writes)      # the decision's row: the cycle queues it
            return outcome
        return answer

    def _permit(self, attended: Attended):
        """The action check before a tool runs, on the confidence of the reply carrying the call."""
        winner = attended.winner

        def permit(verb: ToolVerb, reply: EscalationOutcome) -> str | None:
            allowed, why = self.policy.allows(verb.kind, winner.source_tag, winner.source_confidence,
                                              reply.confidence.composite)
            return None if allowed else why
        return permit

    def reflex_answer(self, retrieval: Retrieval | None, shortfalls: Shortfalls, because: str | None = None,
                      now: datetime | None = None, brief: bool = False, just_said: Sequence[Said] = ()) -> str:
        """The reply without a model: why, what is missing, and what recall brings back, each
        with when it was said (relative to `now`, the cycle's). When recall brings nothing,
        the `just_said` lines stand in (src/loop/just_said.py)."""
        # the immutable boundaries are in every context anyway: they are not "brought back".
        # The content, not the one-line `compressed` ("Hello!" says nothing); the same text
        # recalled twice (two memories of one sentence) is shown once.
        # What was just said (working memory, not yet consolidated) comes first.
        # A statement a newer one updated says until when it held (src/recall/current.py).
        learned = ([(w.content, w.created_at, None) for w in retrieval.working]
                   + [(r.hit.content, memory_time(r.hit.event_time, r.hit.created_at), r.hit.superseded_at)
                      for r in retrieval.memories if not r.hit.immutable]) if retrieval else []
        if not learned:      # the question's answer may be in the turn itself or the window
            learned = [(text, at, None) for text, at in just_said]
        first: dict[str, tuple[datetime | None, datetime | None]] = {}
        for text, at, until in learned:
            first.setdefault(" ".join(text.split()), (at, until))
        now = now or datetime.now(UTC)
        recalled = [(text, said_when(at, now) + (f"; until {the_date(until)}, since updated" if until else ""))
                    for text, (at, until) in first.items()][: self.cfg.reflex_recall_lines]
        return reflex_reply(recalled, said=getattr(self.providers.system1, "reason", None), because=because,
                            missing=shortfalls.line(), brief=brief)


def just_said(attended: Attended, prompt: Prompt) -> list[Said]:
    """The user's statements in this turn and the window that bear on the turn's last
    message (src/loop/just_said.py): the turn's other messages, then the window's, newest first."""
    turn = attended.turn
    question = turn.parts[-1].text
    in_turn = [(p.text, p.enqueued_at) for p in reversed(turn.parts[:-1])]
    window = [(m.content, None) for m in reversed(prompt.messages[:-1]) if m.role == "user"]
    return bearing_on(question, in_turn + window)
