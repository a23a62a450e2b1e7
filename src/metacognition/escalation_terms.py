"""What the loop before escalate (src/metacognition/escalation.py) is given and gives back.

The seven triggers of §3.6, how a focus is put to the models (`Asking`), how an answer's
confidence is judged (`Scoring`), where the decision goes (`Recording`), and the outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Protocol

from src.db.deferred import Deferred
from src.metacognition.calls import FokSource
from src.metacognition.confidence import Confidence, FeelingOfKnowing
from src.metacognition.prompts import System2Answer
from src.metacognition.settings import EscalationSettings, MetacognitionSettings
from src.providers.caller import INTERNAL, Caller
from src.providers.protocols import LanguageModel, LLMResult
from src.recall.store import MemoryStore

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


# --- the loop --------------------------------------------------------------------------------

Assess = Callable[[LLMResult, FeelingOfKnowing], Confidence]


class AnswerWatch(Protocol):
    """Told each answer as it comes back (src/loop/arrivals.py keeps them for a deadline)."""

    def note(self, purpose: str, result: LLMResult, text: str) -> None: ...


@dataclass(frozen=True)
class Asking:
    """How the focus is put to the models: the assembled system prompt, the triggers the loop
    already knows, the model of the isolated FOK call (default: System 1), a shared FOK call
    when the loop answers one focus several times (tool rounds, src/metacognition/calls.py
    `fok_once`), who is told each answer as it arrives, and whose calls they are (the
    user's turn goes first at the endpoint; an impulse counts against the background
    budget: src/providers/caller.py)."""

    system: str | None = None
    triggers: EscalationTriggers | None = None
    meta: LanguageModel | None = None
    fok_source: FokSource | None = None
    arrivals: AnswerWatch | None = None
    caller: Caller = INTERNAL
    # §3.5's one retry; False while retries have rarely succeeded lately (src/metacognition/
    # threshold.py `ThresholdReading.retry_pays`): a low-confidence draft goes to System 2 at once
    retry: bool = True


@dataclass(frozen=True)
class Scoring:
    """How an answer's confidence is judged: `assess` replaces the composite score (tests),
    `expected_words` the length heuristic's target; the settings of §3.5 and §2.11."""

    assess: Assess | None = None
    expected_words: int | None = None
    settings: EscalationSettings | None = None
    metacognition: MetacognitionSettings | None = None


@dataclass(frozen=True)
class Recording:
    """Where the decision goes: System 2's correction to the reflection bank in `store`
    (unless `keep_corrections` is off: memory mode off), the decision's row to `escalations`
    (with memory mode off, a placeholder for the focus, src/gates/modes.py), whose focus it
    was (`source_tag`) and when. `deferred`: the row comes back in the outcome's `writes`
    (the loop queues it on the turn's tasks) instead of being written here."""

    store: MemoryStore
    source_tag: str | None = None
    now: datetime | None = None
    keep_corrections: bool = True
    deferred: bool = False


@dataclass(frozen=True)
class EscalationOutcome:
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
    escalation_id: int | None = None                 # None when the row was deferred or not kept
    writes: tuple[Deferred, ...] = ()                # the decision's row, when deferred

    @property
    def tokens(self) -> tuple[int, int]:
        return (sum(r.tokens_in for _, r in self.results), sum(r.tokens_out for _, r in self.results))
