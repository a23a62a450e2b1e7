"""The answers of one turn as they arrive (issue 27): one that arrived is never lost.

With a small local model System 1 once answered in time and the answer was thrown away
because the retry ran past the cycle's deadline. Thinking watches its models through
`Arrivals.watch`; when the deadline comes before the loop before escalate
(src/metacognition/escalation.py) has finished, the best answer that arrived is the
thought (`late_outcome`): System 2's when it answered, else the System 1 answer (the
first or the retry) with the higher composite confidence, scored with the turn's feeling
of knowing when that call had come back. A reply that calls a tool is not an answer.
The loop before escalate tells `Arrivals` each answer as it comes back (its `Asking`).

`TurnFok` is the turn's one feeling-of-knowing call (every caller awaits the same call,
like `fok_once`), ended with the turn: a call left running after the cycle would hold a
one-slot endpoint that the next turn needs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from src.metacognition.calls import feeling_of_knowing
from src.metacognition.confidence import (
    Confidence,
    FeelingOfKnowing,
    score_answer,
    strip_verbalized_confidence,
)
from src.metacognition.escalation import EscalationOutcome, EscalationTriggers
from src.metacognition.settings import MetacognitionSettings
from src.providers.caller import INTERNAL, Caller
from src.providers.protocols import LanguageModel, LLMResult

ANSWERS = ("system1_answer", "system1_retry")
SYSTEM2 = "system2_escalation"
_LATE_PATH = {"system1_answer": "late_system1", "system1_retry": "late_retry", SYSTEM2: "late_system2"}


@dataclass(frozen=True)
class Arrived:
    """One answer a model returned: its purpose, the generation, the text meant for the user."""

    purpose: str
    result: LLMResult
    text: str


class Arrivals:
    """Every answer of one turn, in the order it came."""

    def __init__(self, is_tool_call: Callable[[str], bool]):
        self._is_tool_call = is_tool_call
        self.seen: list[Arrived] = []

    def note(self, purpose: str, result: LLMResult, text: str) -> None:
        if purpose in (*ANSWERS, SYSTEM2) and text.strip() and not self._is_tool_call(text):
            self.seen.append(Arrived(purpose, result, text))

    def best(self, score: Callable[[Arrived], Confidence]) -> tuple[Arrived, Confidence] | None:
        """System 2's last answer if it came, else System 1's most confident; None: nothing came."""
        system2 = [a for a in self.seen if a.purpose == SYSTEM2]
        if system2:
            return system2[-1], score(system2[-1])
        scored = [(a, score(a)) for a in self.seen if a.purpose in ANSWERS]
        if not scored:
            return None
        return max(reversed(scored), key=lambda pair: pair[1].composite)   # a tie: the later one


class TurnFok:
    """The turn's feeling-of-knowing call: started by the first caller, shared, cancellable."""

    def __init__(self, llm: LanguageModel | None, question: str, settings: MetacognitionSettings,
                 caller: Caller = INTERNAL):
        self._llm, self._question, self._settings, self._caller = llm, question, settings, caller
        self._task: asyncio.Task[FeelingOfKnowing] | None = None

    async def __call__(self) -> FeelingOfKnowing:
        if self._task is None:
            self._task = asyncio.ensure_future(feeling_of_knowing(self._llm, self._question,
                                                                  settings=self._settings, caller=self._caller))
        return await asyncio.shield(self._task)   # one caller cancelled does not end it for the others

    def known(self) -> FeelingOfKnowing | None:
        """The judgement, when the call has come back."""
        task = self._task
        if task is None or not task.done() or task.cancelled() or task.exception() is not None:
            return None
        return task.result()

    async def cancel(self) -> None:
        """End the call if it still runs (the turn is over)."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def late_outcome(arrivals: Arrivals, fok: FeelingOfKnowing | None, *, why: str, threshold: float,
                 settings: MetacognitionSettings) -> EscalationOutcome | None:
    """The best answer that arrived as the turn's outcome (path `late_system1`, `late_retry`
    or `late_system2`); None when none did."""
    judged = fok or FeelingOfKnowing.unavailable(why)

    def score(arrived: Arrived) -> Confidence:
        return score_answer(arrived.text, judged, mean_logprob=arrived.result.mean_logprob, settings=settings)

    best = arrivals.best(score)
    if best is None:
        return None
    arrived, confidence = best
    escalated = arrived.purpose == SYSTEM2
    results: Sequence[tuple[str, LLMResult]] = [(a.purpose, a.result) for a in arrivals.seen]
    return EscalationOutcome(
        answer=strip_verbalized_confidence(arrived.text), path=_LATE_PATH[arrived.purpose], confidence=confidence,
        confidence_before=confidence.composite, confidence_after_retry=None,
        retried=any(a.purpose == "system1_retry" for a in arrivals.seen), retry_succeeded=None,
        escalated=escalated, system2_ok=True if escalated else None, triggers=EscalationTriggers(),
        threshold=threshold, reason=f"{why}; the best answer that arrived ({arrived.purpose})",
        fok=judged, results=list(results))
