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
error) the best System 1 answer is kept and the row says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime

from pydantic import BaseModel, Field

from src.errors import ProviderError, ProviderSkipped
from src.metacognition.calls import feeling_of_knowing
from src.metacognition.confidence import (
    Confidence,
    FeelingOfKnowing,
    score_answer,
    strip_verbalized_confidence,
    weaknesses,
)
from src.metacognition.escalation_log import EscalationRow, record_escalation
from src.metacognition.reflection import store_correction
from src.metacognition.settings import EscalationSettings, MetacognitionSettings
from src.metacognition.threshold import EscalationThreshold, ThresholdReading, read_threshold
from src.providers.protocols import ChatMessage, LanguageModel, LLMResult
from src.recall.store import MemoryStore
from src.text import excerpt

log = logging.getLogger(__name__)

ALWAYS_ESCALATE = ("irreversibility", "identity_touched", "goal_modification")



# --- triggers (§3.6) -------------------------------------------------------------------------

@dataclass(frozen=True)
class EscalationTriggers:
    """The seven triggers of §3.6. The loop sets the ones only it can know
    (contradiction, irreversibility, identity touched, goal modification);
    `loop_before_escalate` adds complexity, FOK UNKNOWN and low confidence."""

    low_confidence: bool = False
    contradiction: bool = False
    complexity: bool = False
    novelty_fok_unknown: bool = False
    irreversibility: bool = False
    identity_touched: bool = False
    goal_modification: bool = False

    def fired(self) -> list[str]:
        return [f.name for f in fields(self) if getattr(self, f.name)]

    def always_fired(self) -> list[str]:
        return [name for name in ALWAYS_ESCALATE if getattr(self, name)]

    def should_escalate(self) -> bool:
        """Two or more triggers, or any always-escalate one."""
        return bool(self.always_fired()) or len(self.fired()) >= 2


_MULTI_STEP = re.compile(
    r"\b(step[- ]by[- ]step|first(?:ly)?|second(?:ly)?|then|after that|afterwards|finally|"
    r"compare|comparison|versus|trade-?offs?|pros and cons|plan|design|migrat\w*|"
    r"walk me through|explain (?:why|how)|how (?:would|should|do|can) (?:i|we|you)|prove|derive|"
    r"calculate|estimate|optimi[sz]e|debug|refactor|implement|what if|as well as)\b",
    re.IGNORECASE)
_ENUMERATED = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+\S", re.MULTILINE)
_WORDS = re.compile(r"\w+")


def complexity_signals(text: str) -> dict[str, float]:
    """What makes a request multi-step: distinct step/planning markers, enumerated
    items, questions beyond the first, length."""
    markers = {m.group(1).lower() for m in _MULTI_STEP.finditer(text)}
    return {"markers": float(len(markers)), "enumerated": float(len(_ENUMERATED.findall(text))),
            "extra_questions": float(max(0, text.count("?") - 1)),
            "words": float(len(_WORDS.findall(text)))}


def complexity(text: str) -> float:
    """1 - exp(-(0.35·markers + 0.3·enumerated + 0.3·extra questions + words/200)), in [0, 1).

    "what about X?" scores ~0.02; "First compare A and B, then design a migration
    plan step by step. What are the risks?" ~0.9. Each marker counts once, so
    "then … then … then" is not three steps.
    """
    s = complexity_signals(text)
    load = 0.35 * s["markers"] + 0.3 * s["enumerated"] + 0.3 * s["extra_questions"] + s["words"] / 200
    return 1.0 - math.exp(-load)


# --- the loop --------------------------------------------------------------------------------

class System2Answer(BaseModel):
    """System 2's structured reply (§3.6: answer + explanation + correction pattern)."""

    answer: str = Field(min_length=1, description="the reply the agent should give")
    explanation: str = Field(description="why, briefly")
    needed_correction: bool = Field(description="whether System 1's draft was wrong or weak")
    error_type: str = Field("", description="a few words naming the error; empty when none")
    correction_pattern: str = Field("", description="the general lesson for similar situations")


Assess = Callable[[LLMResult, FeelingOfKnowing], Confidence]


@dataclass(frozen=True)
class Outcome:
    answer: str                           # what the loop delivers (confidence line stripped)
    path: str                             # system1 | retry | system2 | system1_fallback
    confidence: Confidence                # of the delivered answer
    confidence_before: float
    confidence_after_retry: float | None
    retried: bool
    retry_succeeded: bool | None
    escalated: bool
    system2_ok: bool | None
    triggers: EscalationTriggers
    threshold: float
    reason: str
    fok: FeelingOfKnowing
    system2: System2Answer | None = None
    results: list[tuple[str, LLMResult]] = field(default_factory=list)   # (purpose, generation)
    correction_id: int | None = None
    escalation_id: int | None = None

    @property
    def tokens(self) -> tuple[int, int]:
        return (sum(r.tokens_in for _, r in self.results), sum(r.tokens_out for _, r in self.results))


def retry_feedback(focus: str, confidence: Confidence, threshold: float) -> str:
    """The targeted feedback of the one retry: what was weak and what to do."""
    points = "\n".join(f"- {w}" for w in weaknesses(confidence))
    return (f"[SELF-CHECK] Your reply above scored {confidence.composite:.2f} on confidence, below the "
            f"{threshold:.2f} needed before you answer without deeper review. What was weak:\n{points}\n"
            f"Reply again to the same focus (\"{excerpt(focus, 200)}\"), fixing these points. Say plainly "
            "what you know and say explicitly what you do not know rather than guessing. End with a "
            "line 'Confidence: <0-1>'.")


def system2_brief(focus: str, reasons: str, confidence: Confidence) -> str:
    """The request System 2 gets after System 1's draft."""
    weak = "; ".join(weaknesses(confidence))
    return ("[ESCALATION TO SYSTEM 2] You are this agent's slow, deliberate reasoning. The reply above "
            f"is a draft by its fast System 1 for the current focus: \"{excerpt(focus, 500)}\". "
            f"It was escalated because: {reasons}. The draft scored {confidence.composite:.2f} on "
            f"confidence; what looked weak: {weak}. Write the reply the agent should give (answer), "
            "explain your reasoning briefly (explanation), say whether the draft needed correcting "
            "(needed_correction), name the kind of error in a few words (error_type, e.g. 'unsupported "
            "claim', 'missed step', 'overconfident guess'; empty when none) and state the general "
            "lesson System 1 should apply next time in a similar situation (correction_pattern, one "
            "or two sentences).")


def _draft(result: LLMResult) -> ChatMessage:
    # providers refuse an empty assistant turn; an empty draft is still a draft to review
    return ChatMessage("assistant", result.text if result.text.strip() else "(empty reply)")


async def _first_answer(system1: LanguageModel, meta: LanguageModel | None, messages: Sequence[ChatMessage],
                        system: str | None, focus: str, cfg: MetacognitionSettings
                        ) -> tuple[LLMResult, FeelingOfKnowing]:
    """System 1's answer and the FOK meta call, concurrently (FOK never raises)."""
    fok_task = asyncio.create_task(feeling_of_knowing(meta, focus, settings=cfg))
    try:
        first = await system1.generate(messages, purpose="system1_answer", system=system)
    except BaseException:
        fok_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await fok_task
        raise
    return first, await fok_task


async def loop_before_escalate(
    system1: LanguageModel, system2: LanguageModel, messages: Sequence[ChatMessage], *,
    focus: str, threshold: float, meta: LanguageModel | None = None, system: str | None = None,
    triggers: EscalationTriggers | None = None, assess: Assess | None = None,
    expected_words: int | None = None, settings: EscalationSettings | None = None,
    metacognition: MetacognitionSettings | None = None, store: MemoryStore | None = None,
    source_tag: str | None = None, now: datetime | None = None, keep_corrections: bool = True,
) -> Outcome:
    """Answer the current focus with System 1, retrying once and escalating as §3.5/§3.6 say.

    `messages` is the assembled conversation ending with the focus; `system` the
    assembled system prompt (identity, cognitive state report, reflection block).
    `meta` makes the isolated FOK call (default: System 1). `triggers` are the
    ones the loop already knows. With a `store`, a correction from System 2 goes
    to the reflection bank (unless `keep_corrections` is off: memory mode off) and the
    decision is written to `escalations`.
    System 1 in reflex mode raises ProviderSkipped: the loop answers reflexively
    without calling this.
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
    cfg = settings or EscalationSettings()
    mcfg = metacognition or MetacognitionSettings()
    score = assess or (lambda result, fok: score_answer(result.text, fok, mean_logprob=result.mean_logprob,
                                                        expected_words=expected_words, settings=mcfg))
    results: list[tuple[str, LLMResult]] = []
    first, fok = await _first_answer(system1, meta or system1, messages, system, focus, mcfg)
    results.append(("system1_answer", first))
    c1 = score(first, fok)
    known = triggers or EscalationTriggers()
    trig = replace(known, complexity=known.complexity or complexity(focus) >= cfg.complexity_threshold,
                   novelty_fok_unknown=fok.judgement == "UNKNOWN")
    base = dict(confidence_before=c1.composite, threshold=threshold, fok=fok, results=results)

    def done(answer: LLMResult, conf: Confidence, path: str, reason: str, **kw) -> Outcome:
        return Outcome(answer=strip_verbalized_confidence(answer.text), path=path, confidence=conf,
                       reason=reason, **{"confidence_after_retry": None, "retried": False,
                                         "retry_succeeded": None, "escalated": False,
                                         "system2_ok": None, "triggers": trig, **base, **kw})

    best, best_c = first, c1
    retry_kw: dict = {}
    if trig.always_fired():
        reason = f"always-escalate trigger: {', '.join(trig.always_fired())}"
    elif trig.should_escalate():
        reason = f"{len(trig.fired())} triggers: {', '.join(trig.fired())}"
    elif c1.composite >= threshold:
        note = f"; trigger noted: {', '.join(trig.fired())}" if trig.fired() else ""
        return await _finish(done(first, c1, "system1",
                                  f"confidence {c1.composite:.2f} >= threshold {threshold:.2f}{note}"),
                             store, focus, source_tag, now)
    else:
        feedback = retry_feedback(focus, c1, threshold)
        retry_messages = [*messages, _draft(first), ChatMessage("user", feedback)]
        try:
            second = await system1.generate(retry_messages, purpose="system1_retry", system=system)
        except ProviderError as exc:
            log.warning("System 1 retry failed, escalating: %s", exc)
            second, c2 = None, None
        if second is not None:
            results.append(("system1_retry", second))
            c2 = score(second, fok)
            if c2.composite >= threshold:
                return await _finish(done(second, c2, "retry",
                                          f"confidence {c1.composite:.2f} < threshold {threshold:.2f}; "
                                          f"retry reached {c2.composite:.2f}",
                                          confidence_after_retry=c2.composite, retried=True,
                                          retry_succeeded=True), store, focus, source_tag, now)
            if c2.composite >= c1.composite:
                best, best_c = second, c2
        trig = replace(trig, low_confidence=True)
        after = f"{c2.composite:.2f}" if c2 is not None else "no answer (retry failed)"
        reason = (f"confidence {c1.composite:.2f} < threshold {threshold:.2f}, still {after} "
                  "after one retry")
        if len(trig.fired()) > 1:
            reason += f"; triggers: {', '.join(trig.fired())}"
        retry_kw = dict(confidence_after_retry=None if c2 is None else c2.composite, retried=True,
                        retry_succeeded=False)

    log.info("escalating to System 2 (%s): %s", system2.model, reason)
    brief = system2_brief(focus, reason, best_c)
    s2_messages = [*messages, _draft(best), ChatMessage("user", brief)]
    try:
        if not system2.configured:
            raise ProviderSkipped("no language model is configured for System 2", provider=system2.provider)
        reply = await system2.generate_structured(s2_messages, System2Answer, purpose="system2_escalation",
                                                  system=system, max_tokens=cfg.system2_max_tokens)
    except ProviderSkipped as exc:
        return await _finish(done(best, best_c, "system1_fallback", f"{reason}; system2 unavailable ({exc})",
                                  escalated=True, system2_ok=False, **retry_kw),
                             store, focus, source_tag, now)
    except ProviderError as exc:
        log.warning("System 2 failed, keeping System 1's best answer: %s", exc)
        return await _finish(done(best, best_c, "system1_fallback",
                                  f"{reason}; system2 failed ({type(exc).__name__}: {exc})",
                                  escalated=True, system2_ok=False, **retry_kw),
                             store, focus, source_tag, now)
    results.append(("system2_escalation", reply.result))
    value = reply.value
    delivered = replace(reply.result, text=value.answer, logprobs=None)
    outcome = done(delivered, score(delivered, fok), "system2", reason, escalated=True, system2_ok=True,
                   system2=value, **retry_kw)
    if store is not None and keep_corrections and value.needed_correction and value.correction_pattern.strip():
        correction_id = await store_correction(
            store, trigger=focus, error_type=value.error_type, original_reasoning=best.text,
            correction=value.correction_pattern,
            context=(f"source {source_tag or 'unknown'}; escalated because {reason}; System 1 "
                     f"confidence {best_c.composite:.2f}"),
            source_confidence=cfg.reflection.source_confidence,
            extra={"escalation_triggers": trig.fired(), "system2_model": system2.model,
                   "explanation": value.explanation[:2000]})
        outcome = replace(outcome, correction_id=correction_id)
    return await _finish(outcome, store, focus, source_tag, now)


async def _finish(outcome: Outcome, store: MemoryStore | None, focus: str, source_tag: str | None,
                  now: datetime | None) -> Outcome:
    """Write the decision row when there is a store; log the path."""
    log.info("confidence decision: %s (%s)", outcome.path, outcome.reason)
    if store is None:
        return outcome
    row = EscalationRow(
        attention_focus=focus, source_tag=source_tag, threshold=outcome.threshold,
        confidence_before=outcome.confidence_before, confidence_after_retry=outcome.confidence_after_retry,
        retried=outcome.retried, retry_succeeded=outcome.retry_succeeded, escalated=outcome.escalated,
        triggers=outcome.triggers.fired(), system2_ok=outcome.system2_ok, path=outcome.path,
        correction_id=outcome.correction_id, reason=outcome.reason,
        details={"fok": outcome.fok.judgement, "fok_skipped": outcome.fok.skipped,
                 "confidence": outcome.confidence.composite,
                 "calls": [purpose for purpose, _ in outcome.results]})
    escalation_id = await record_escalation(store.pool, row, at=now)
    return replace(outcome, escalation_id=escalation_id)


__all__ = [
    "ALWAYS_ESCALATE", "Assess", "EscalationSettings", "EscalationThreshold", "EscalationTriggers",
    "Outcome", "System2Answer", "ThresholdReading", "complexity", "complexity_signals",
    "loop_before_escalate", "read_threshold", "retry_feedback", "system2_brief",
]
