"""Loop before escalate (plan §3.5) and System 2 escalation (§3.6).

    System 1 answers (the FOK meta call runs alongside) → composite confidence
    ├─ an always-escalate trigger (irreversibility, identity touched, goal
    │  modification) or 2+ triggers (contradiction, complexity, FOK UNKNOWN)
    │  → System 2 at once: a retry cannot fix what the triggers are about
    ├─ confidence ≥ threshold → System 1's answer
    └─ below → System 1 once more, told what was weak
         ├─ now ≥ threshold → the retry's answer (a successful retry)
         └─ still below → low_confidence fires → System 2 (§3.5: at most one retry
            before escalation, so a failed retry escalates on its own)

The threshold is §3.5's 0.3 + 0.5·maturity (src/metacognition/threshold.py,
re-exported here), from the memory count and identity density in one statement.

System 1 stays in the driver's seat: System 2 is consulted like a tool, with the
same context plus System 1's draft, and returns a structured answer (answer,
explanation, whether the draft needed correcting, error type, correction
pattern). The loop delivers System 2's answer as the agent's own turn; the
correction pattern goes to the reflection bank, where System 1 meets it before
answering in a similar situation. Without System 2 (reflex mode, or a provider
error), or when System 2 is System 1's own model (src/metacognition/roles.py: no call
is made), the best System 1 answer is kept and the row says why. Where System 1 returns
token logprobs they give the confidence and the FOK call is skipped (`_first_answer`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from src.db.deferred import Deferred
from src.errors import ProviderError, ProviderSkipped
from src.gates.modes import unkept_text
from src.metacognition.answer_form import Defect, exchanges, form_defect
from src.metacognition.calls import feeling_of_knowing
from src.metacognition.complexity import complexity, complexity_signals
from src.metacognition.confidence import (
    Confidence,
    FeelingOfKnowing,
    score_answer,
    strip_verbalized_confidence,
)
from src.metacognition.escalation_log import EscalationRow, record_escalation
from src.metacognition.escalation_terms import (
    ALWAYS_ESCALATE,
    AnswerWatch,
    Asking,
    Assess,
    EscalationOutcome,
    EscalationTriggers,
    Recording,
    Scoring,
)
from src.metacognition.prompts import System2Answer, retry_feedback, system2_brief
from src.metacognition.reflection import NewCorrection, store_correction
from src.metacognition.roles import same_model
from src.metacognition.settings import EscalationSettings, MetacognitionSettings
from src.metacognition.threshold import EscalationThreshold, ThresholdReading, read_threshold
from src.providers.prompts import EMPTY_REPLY
from src.providers.protocols import ChatMessage, LanguageModel, LLMResult

log = logging.getLogger(__name__)

#: Why the FOK is not part of a confidence read from token logprobs.
BY_LOGPROBS = "not asked: the answer's token logprobs give the confidence"


def _draft(result: LLMResult) -> ChatMessage:
    # providers refuse an empty assistant turn; an empty draft is still a draft to review
    return ChatMessage("assistant", result.text if result.text.strip() else EMPTY_REPLY)


async def _first_answer(system1: LanguageModel, messages: Sequence[ChatMessage], focus: str, asking: Asking,
                        cfg: MetacognitionSettings) -> tuple[LLMResult, FeelingOfKnowing]:
    """System 1's answer and the FOK meta call, concurrently (FOK never raises); the answer
    is told to `asking.arrivals` as soon as it comes, not after the FOK call.

    Where System 1's answer carries token logprobs they give the confidence (§2.11: the
    primary signal) and the FOK goes unused; once System 1 is known to return them
    (`logprobs_supported`) the FOK call is not made at all, unless an answer comes without.
    """
    meta = asking.meta or system1
    ask = asking.fok_source or (lambda: feeling_of_knowing(meta, focus, settings=cfg, caller=asking.caller))

    async def generate() -> LLMResult:
        result = await system1.generate(messages, purpose="system1_answer", system=asking.system,
                                        caller=asking.caller)
        if asking.arrivals is not None:
            asking.arrivals.note("system1_answer", result, result.text)
        return result

    if getattr(system1, "logprobs_supported", None) is True:
        first = await generate()
        return first, (FeelingOfKnowing.unavailable(BY_LOGPROBS) if first.logprobs else await ask())
    fok_task = asyncio.ensure_future(ask())
    try:
        first = await generate()
    except BaseException:
        fok_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await fok_task
        raise
    felt = await fok_task
    return first, (FeelingOfKnowing.unavailable(BY_LOGPROBS) if first.logprobs else felt)


async def loop_before_escalate(
    system1: LanguageModel, system2: LanguageModel, messages: Sequence[ChatMessage], *,
    focus: str, threshold: float, asking: Asking | None = None, scoring: Scoring | None = None,
    recording: Recording | None = None,
) -> EscalationOutcome:
    """Answer the current focus with System 1, retrying once and escalating as §3.5/§3.6 say.

    `messages` is the assembled conversation ending with the focus; `asking.system` the
    assembled system prompt (identity, cognitive state report, reflection block). With
    `recording`, a correction from System 2 goes to the reflection bank and the decision
    is written to `escalations` (or handed back in `writes`: `Recording.deferred`).
    System 1 in reflex mode raises ProviderSkipped: the loop answers reflexively
    without calling this.
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
    asking, scoring = asking or Asking(), scoring or Scoring()
    cfg = scoring.settings or EscalationSettings()
    mcfg = scoring.metacognition or MetacognitionSettings()
    score = scoring.assess or (lambda result, fok: score_answer(
        result.text, fok, mean_logprob=result.mean_logprob, expected_words=scoring.expected_words, settings=mcfg))
    turn = _Escalation(messages, focus, threshold, cfg, score, asking, recording)
    await turn.answer(system1, mcfg, asking.triggers or EscalationTriggers())
    draft = turn.escalating_at_once()
    if draft is None:
        confident = turn.confident_first_answer()
        if confident is not None:
            return await turn.finish(confident)
        retried = await turn.retry_once(system1) if asking.retry else turn.without_retry()
        if isinstance(retried, EscalationOutcome):
            return await turn.finish(retried)
        draft = retried
    if same_model(system1, system2):
        return await turn.finish(turn.kept_without_system2(system2, draft))
    return await turn.finish(await turn.escalate(system2, draft))


@dataclass(frozen=True)
class _Draft:
    """System 1's best answer on its way to System 2, why, and the retry's EscalationOutcome fields."""

    result: LLMResult
    confidence: Confidence
    reason: str
    retry: dict = field(default_factory=dict)


class _Escalation:
    """One focus on its way through §3.5/§3.6, one method per step: System 1 answers,
    escalate at once, accept, retry once, escalate, keep the correction, finish. The state
    they share: the conversation, the first answer with its FOK and confidence, the
    triggers (low confidence joins them after a failed retry), the generations so far."""

    def __init__(self, messages: Sequence[ChatMessage], focus: str, threshold: float, cfg: EscalationSettings,
                 score: Assess, asking: Asking, recording: Recording | None):
        self.messages, self.focus, self.threshold = messages, focus, threshold
        self.cfg, self.score, self.asking, self.recording = cfg, score, asking, recording
        self.system = asking.system
        self.results: list[tuple[str, LLMResult]] = []

    def arrived(self, purpose: str, result: LLMResult, text: str) -> None:
        """A generation came back: kept with the outcome, told to whoever watches the turn."""
        self.results.append((purpose, result))
        if self.asking.arrivals is not None and purpose != "system1_answer":   # that one: told already
            self.asking.arrivals.note(purpose, result, text)

    async def answer(self, system1: LanguageModel, mcfg: MetacognitionSettings, known: EscalationTriggers) -> None:
        """System 1 answers (the FOK call alongside); its composite confidence; the triggers."""
        self.first, self.fok = await _first_answer(system1, self.messages, self.focus, self.asking, mcfg)
        self.arrived("system1_answer", self.first, self.first.text)
        self.c1 = self.score(self.first, self.fok)
        self.trig = replace(known, novelty_fok_unknown=self.fok.judgement == "UNKNOWN",
                            complexity=known.complexity or complexity(self.focus) >= self.cfg.complexity_threshold)

    def outcome(self, answer: LLMResult, conf: Confidence, path: str, reason: str, **kw) -> EscalationOutcome:
        """Delivering `answer`; `kw` sets what differs from a first answer kept as it is."""
        return EscalationOutcome(answer=strip_verbalized_confidence(answer.text), path=path, confidence=conf,
                       reason=reason, **{"confidence_after_retry": None, "retried": False,
                                         "retry_succeeded": None, "escalated": False, "system2_ok": None,
                                         "triggers": self.trig, "confidence_before": self.c1.composite,
                                         "threshold": self.threshold, "fok": self.fok,
                                         "results": self.results, **kw})

    def defect(self, result: LLMResult) -> Defect | None:
        """What makes the answer no answer, whatever its confidence: empty, a refusal, talk
        about itself, the prompt's markup, or an earlier answer to another message again
        (src/metacognition/answer_form.py; a small model's canned refusal scored 0.70–0.93).
        Repeats count in the user's turns: a thought of the mind's own coming back to what it
        holds is not said when it says nothing new (src/loop/acting.py `unprompted_verdict`)."""
        earlier = exchanges(self.messages) if self.asking.caller.priority == "user" else ()
        return form_defect(result.text, focus=self.focus, earlier=earlier)

    def escalating_at_once(self) -> _Draft | None:
        """An always-escalate trigger, or two triggers: a retry cannot fix what they are about."""
        fired = self.trig.fired()
        if self.trig.always_fired():
            return _Draft(self.first, self.c1, f"always-escalate trigger: {', '.join(self.trig.always_fired())}")
        if self.trig.should_escalate():
            return _Draft(self.first, self.c1, f"{len(fired)} triggers: {', '.join(fired)}")
        return None

    def confident_first_answer(self) -> EscalationOutcome | None:
        """System 1's answer when its confidence reaches the threshold."""
        if self.c1.composite < self.threshold or self.defect(self.first) is not None:
            return None
        note = f"; trigger noted: {', '.join(self.trig.fired())}" if self.trig.fired() else ""
        return self.outcome(self.first, self.c1, "system1",
                            f"confidence {self.c1.composite:.2f} >= threshold {self.threshold:.2f}{note}")

    async def retry_once(self, system1: LanguageModel) -> EscalationOutcome | _Draft:
        """System 1 once more, told what was weak: its answer when now confident, else the
        better of the two drafts for System 2 (§3.5: a failed retry escalates on its own)."""
        first_defect = self.defect(self.first)
        feedback = retry_feedback(self.focus, self.c1, self.threshold,
                                  defect=None if first_defect is None else first_defect.describe())
        retry_messages = [*self.messages, _draft(self.first), ChatMessage("user", feedback)]
        best, best_c, c2 = self.first, self.c1, None
        try:
            second = await system1.generate(retry_messages, purpose="system1_retry", system=self.system,
                                            caller=self.asking.caller)
        except ProviderError as exc:
            log.warning("System 1 retry failed, escalating: %s", exc)
            second = None
        if second is not None:
            self.arrived("system1_retry", second, second.text)
            c2 = self.score(second, self.fok)
            second_defect = self.defect(second)
            if c2.composite >= self.threshold and second_defect is None:
                why = (f"{first_defect.kind} ({first_defect.detail!r})" if first_defect is not None
                       else f"confidence {self.c1.composite:.2f} < threshold {self.threshold:.2f}")
                return self.outcome(second, c2, "retry", f"{why}; retry reached {c2.composite:.2f}",
                                    confidence_after_retry=c2.composite, retried=True, retry_succeeded=True)
            # a draft that is an answer beats one that is not, whatever their confidences
            if (second_defect is None, c2.composite) >= (first_defect is None, self.c1.composite):
                best, best_c = second, c2
        self.trig = replace(self.trig, low_confidence=True)
        after = f"{c2.composite:.2f}" if c2 is not None else "no answer (retry failed)"
        reason = (f"{first_defect.kind} ({first_defect.detail!r}), confidence {self.c1.composite:.2f}"
                  if first_defect is not None else
                  f"confidence {self.c1.composite:.2f} < threshold {self.threshold:.2f}") + f", still {after} after one retry"
        if len(self.trig.fired()) > 1:
            reason += f"; triggers: {', '.join(self.trig.fired())}"
        return _Draft(best, best_c, reason, dict(confidence_after_retry=None if c2 is None else c2.composite,
                                                 retried=True, retry_succeeded=False))

    def without_retry(self) -> _Draft:
        """The first answer as the draft for System 2, no retry asked (`Asking.retry`: retries
        have rarely succeeded lately)."""
        self.trig = replace(self.trig, low_confidence=True)
        reason = (f"confidence {self.c1.composite:.2f} < threshold {self.threshold:.2f}; no retry "
                  "(retries have rarely reached the threshold lately)")
        return _Draft(self.first, self.c1, reason)

    def kept_without_system2(self, system2: LanguageModel, draft: _Draft) -> EscalationOutcome:
        """System 2 is System 1's own model (src/metacognition/roles.py): no escalation call,
        the draft stands and the row says so."""
        log.info("not escalating: System 2 is the same model as System 1 (%s): %s", system2.model, draft.reason)
        return self.outcome(draft.result, draft.confidence, "system1_fallback",
                            f"{draft.reason}; system2 is the same model as system1 ({system2.model}): "
                            "no escalation call", **draft.retry)

    async def escalate(self, system2: LanguageModel, draft: _Draft) -> EscalationOutcome:
        """System 2 reviews the draft and answers; without it (reflex mode, an error) the draft stands."""
        log.info("escalating to System 2 (%s): %s", system2.model, draft.reason)
        brief = system2_brief(self.focus, draft.reason, draft.confidence)
        s2_messages = [*self.messages, _draft(draft.result), ChatMessage("user", brief)]
        kept = dict(escalated=True, system2_ok=False, **draft.retry)
        try:
            if not system2.configured:
                raise ProviderSkipped("no language model is configured for System 2", provider=system2.provider)
            reply = await system2.generate_structured(s2_messages, System2Answer, purpose="system2_escalation",
                                                      system=self.system, max_tokens=self.cfg.system2_max_tokens,
                                                      caller=self.asking.caller)
        except ProviderSkipped as exc:
            return self.outcome(draft.result, draft.confidence, "system1_fallback",
                                f"{draft.reason}; system2 unavailable ({exc})", **kept)
        except ProviderError as exc:
            log.warning("System 2 failed, keeping System 1's best answer: %s", exc)
            return self.outcome(draft.result, draft.confidence, "system1_fallback",
                                f"{draft.reason}; system2 failed ({type(exc).__name__}: {exc})", **kept)
        value = reply.value
        self.arrived("system2_escalation", reply.result, value.answer)
        delivered = replace(reply.result, text=value.answer, logprobs=None)
        outcome = self.outcome(delivered, self.score(delivered, self.fok), "system2", draft.reason,
                               escalated=True, system2_ok=True, system2=value, **draft.retry)
        return replace(outcome, correction_id=await self.keep_correction(system2, value, draft))

    async def keep_correction(self, system2: LanguageModel, value: System2Answer, draft: _Draft) -> int | None:
        """System 2's correction pattern to the reflection bank, where System 1 meets it before
        answering in a similar situation; none without a store, with memory mode off, or
        when the draft needed no correcting."""
        rec = self.recording
        if (rec is None or not rec.keep_corrections or not value.needed_correction
                or not value.correction_pattern.strip()):
            return None
        return await store_correction(
            rec.store, NewCorrection(
                trigger=self.focus, error_type=value.error_type, original_reasoning=draft.result.text,
                correction=value.correction_pattern,
                context=(f"source {rec.source_tag or 'unknown'}; escalated because {draft.reason}; System 1 "
                         f"confidence {draft.confidence.composite:.2f}")),
            source_confidence=self.cfg.reflection.source_confidence,
            extra={"escalation_triggers": self.trig.fired(), "system2_model": system2.model,
                   "explanation": value.explanation[:2000]})

    async def finish(self, outcome: EscalationOutcome) -> EscalationOutcome:
        """Write the decision row when there is a store; log the path."""
        log.info("confidence decision: %s (%s)", outcome.path, outcome.reason)
        rec = self.recording
        if rec is None:
            return outcome
        # memory mode off (no corrections kept): the row keeps the focus's size, not its words
        focus = self.focus if rec.keep_corrections else unkept_text(self.focus)
        row = EscalationRow(
            attention_focus=focus, source_tag=rec.source_tag, threshold=outcome.threshold,
            confidence_before=outcome.confidence_before, confidence_after_retry=outcome.confidence_after_retry,
            retried=outcome.retried, retry_succeeded=outcome.retry_succeeded, escalated=outcome.escalated,
            triggers=outcome.triggers.fired(), system2_ok=outcome.system2_ok, path=outcome.path,
            correction_id=outcome.correction_id, reason=outcome.reason,
            details={"fok": outcome.fok.judgement, "fok_skipped": outcome.fok.skipped,
                     "confidence": outcome.confidence.composite,
                     "calls": [purpose for purpose, _ in outcome.results]})
        if rec.deferred:   # nothing in the turn reads the row back
            return replace(outcome, writes=(Deferred(
                "escalation decision", functools.partial(record_escalation, rec.store.pool, row, at=rec.now),
                lane="escalations"),))
        return replace(outcome, escalation_id=await record_escalation(rec.store.pool, row, at=rec.now))


__all__ = [
    "ALWAYS_ESCALATE", "AnswerWatch", "Asking", "Assess", "Recording", "Scoring", "EscalationSettings", "EscalationThreshold", "EscalationTriggers",
    "EscalationOutcome", "System2Answer", "ThresholdReading", "complexity", "complexity_signals",
    "loop_before_escalate", "read_threshold", "retry_feedback", "system2_brief",
]
