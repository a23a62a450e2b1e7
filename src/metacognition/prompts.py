"""What metacognition says to a model (plan §2.11, §3.5–§3.7).

- `VERBALIZED_CONFIDENCE_INSTRUCTION` closes System 1's system prompt (§2.11's
  verbalized signal; the line is stripped before delivery).
- `FOK_PROMPT` is the isolated feeling-of-knowing question, answered as `FokAnswer`
  with one of the `Judgement` words it defines.
- `weaknesses` puts what made an answer look unsure into words System 1 can act on;
  `retry_feedback` (the one retry, §3.5) and `system2_brief` (escalation, §3.6,
  answered as `System2Answer`) carry them.
- `reflection_block` is the reflection bank's part of the system prompt (§3.7).

Pure: the callers (calls.py, escalation.py, reflection.py) pass plain values or objects
with the attributes named below.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from src.recall.when import said_when
from src.text import excerpt

Judgement = Literal["KNOWN", "PARTIAL", "UNKNOWN"]

#: Ask for this in System 1's system prompt so a verbalized signal exists.
VERBALIZED_CONFIDENCE_INSTRUCTION = (
    "End every reply with a last line 'Confidence: <a number from 0 to 1>' saying how sure "
    "you are that the reply is right.")

FOK_PROMPT = """Do you know the answer to the question below? Do not answer it.
Judge only your own knowledge:
- KNOWN: you know the answer and could state it correctly;
- PARTIAL: you know part of it, or you would have to guess some of it;
- UNKNOWN: you do not know it (or it depends on facts you do not have).
Also give a confidence from 0 to 1 that an answer you gave now would be correct.

Question:
<<<
{question}
>>>"""


class FokAnswer(BaseModel):
    """The meta call's reply."""

    judgement: Judgement
    confidence: float = Field(ge=0.0, le=1.0)


class ScoredAnswer(Protocol):
    """What `weaknesses` reads of a composite confidence (src/metacognition/confidence.Confidence)."""

    @property
    def composite(self) -> float: ...
    @property
    def verbalized(self) -> float | None: ...
    @property
    def signals(self) -> Mapping[str, Any]: ...
    @property
    def fok_unknown(self) -> bool: ...


def weaknesses(confidence: ScoredAnswer) -> list[str]:
    """What made the answer look unsure, in words System 1 can act on (the retry's feedback)."""
    s = confidence.signals
    out = []
    hedges = s.get("hedge_phrases") or []
    if hedges:
        shown = ", ".join(f"'{h}'" for h in dict.fromkeys(h.lower() for h in hedges))
        out.append(f"it hedged {len(hedges)} time{'s' if len(hedges) > 1 else ''} ({shown}) instead "
                   "of saying plainly what is known and what is not")
    markers = s.get("correction_markers") or []
    if markers:
        shown = ", ".join(f"'{m}'" for m in dict.fromkeys(m.lower() for m in markers))
        out.append(f"it corrected itself mid-answer ({shown}); give only the corrected version")
    if s.get("question_rate", 0) > 0:
        out.append("it answered with questions; answer first, ask at most one clarifying question")
    if s.get("length_anomaly", 0) >= 0.5:
        out.append("its length was far from what such an answer usually needs")
    if s.get("words", 1) == 0:
        out.append("it was empty")
    if confidence.fok_unknown:
        out.append("the feeling-of-knowing check judged the question UNKNOWN: separate what you "
                   "can support from what you would be guessing")
    elif s.get("fok_judgement") == "PARTIAL":
        out.append("the feeling-of-knowing check judged the answer only PARTIALLY known")
    if confidence.verbalized is not None and confidence.verbalized < 0.5:
        out.append(f"its stated confidence was low ({confidence.verbalized:.2f})")
    if "logprob_confidence" in s and s["logprob_confidence"] < 0.5:
        out.append("its wording was improbable to the model itself (low token probabilities)")
    return out or ["no single part stood out; check each claim against what you remember"]


#: Why a reply was no answer (src/metacognition/answer_form.py), as the retry's feedback says it.
DEFECT_CAUSES = {
    "empty": "your reply above had no words",
    "refusal": "your reply above declined to answer; the message is an ordinary one from the person "
               "you talk with, and nothing in it needs declining",
    "meta": "your reply above talked about a reply (its confidence or quality) instead of answering",
    "protocol": "your reply above repeated internal markup of the prompt instead of answering",
    "repeat": "your reply above repeats, word for word, what you answered to an earlier, different message",
    "stutter": "your reply above says the same few words over and over",
    "self": "your reply above talks about yourself, but the message asks about the person you talk "
            "with: answer about them, as \"you\", from what they told you",
    "echo": "your reply above only says the message back",
}


def retry_feedback(focus: str, confidence: ScoredAnswer, threshold: float, defect: str | None = None) -> str:
    """The one retry's feedback: the real cause — `defect` when the reply was no answer
    (src/metacognition/answer_form.py: empty, a refusal, talk about itself, markup, a
    repeat), else what made it uncertain — and a request for the answer itself. A small
    model told only its score wrote about its confidence instead of answering (issue 38)."""
    if defect is not None:
        cause = f"{defect[0].upper()}{defect[1:]}."
    else:
        points = "\n".join(f"- {w}" for w in weaknesses(confidence))
        cause = f"Your reply above may be wrong or incomplete:\n{points}"
    return (f"[SELF-CHECK] {cause}\nNow answer the message itself (\"{excerpt(focus, 200)}\") for the person, "
            "in plain words. If it tells you a fact, say briefly that you will remember it, in your own words. "
            "Say what you know; say plainly what you do not know rather than guessing. Do not mention "
            "confidence, scores, this check or your earlier reply. End with a line 'Confidence: <0-1>'.")


def system2_brief(focus: str, reasons: str, confidence: ScoredAnswer) -> str:
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


class System2Answer(BaseModel):
    """System 2's structured reply (§3.6: answer + explanation + correction pattern)."""

    answer: str = Field(min_length=1, description="the reply the agent should give")
    explanation: str = Field(description="why, briefly")
    needed_correction: bool = Field(description="whether System 1's draft was wrong or weak")
    error_type: str = Field("", description="a few words naming the error; empty when none")
    correction_pattern: str = Field("", description="the general lesson for similar situations")


REFLECTION_HEADER = "In similar past situations, you made these errors:"


class Correction(Protocol):
    """What `reflection_block` shows of a past correction (src/metacognition/reflection.PastCorrection)."""

    @property
    def trigger(self) -> str: ...
    @property
    def error_type(self) -> str: ...
    @property
    def original_reasoning(self) -> str: ...
    @property
    def correction(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...


def reflection_block(corrections: Sequence[Correction], *, field_chars: int = 300,
                     now: datetime | None = None) -> str:
    """The text injected before System 1 answers; "" when there is nothing to inject.

    With `now` (the cycle's) each correction ends with when it was recorded, as every
    memory line does (issue 37: "(Wed 25 Nov 2026, 3 days ago)"): a lesson from last year
    and one from this morning are not the same evidence. Without it no date is read."""
    if not corrections:
        return ""
    lines = [REFLECTION_HEADER]
    for i, c in enumerate(corrections, 1):
        kind = f"[{excerpt(c.error_type, 60)}] " if c.error_type else ""
        line = f"{i}. {kind}Situation: {excerpt(c.trigger, field_chars)}"
        if c.original_reasoning:
            line += f" | What you did: {excerpt(c.original_reasoning, field_chars)}"
        line += f" | Do instead: {excerpt(c.correction, field_chars)}"
        if now is not None:
            line += f" ({said_when(c.created_at, now)})"
        lines.append(line)
    return "\n".join(lines)
