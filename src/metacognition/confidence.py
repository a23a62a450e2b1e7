"""Composite confidence (plan §2.11): objective signals, feeling of knowing, what the model says.

    C = 0.5·objective + 0.35·FOK + 0.15·verbalized

* objective: how the answer reads, not what it claims. Structural heuristics
  always (hedging phrases, self-correction markers, question rate, length
  anomaly against an expected length); with token logprobs (providers that
  return them) the geometric-mean token probability exp(mean logprob) becomes
  the primary part (`logprob_share`, 0.7) and the heuristics keep the rest,
  because fluent tokens do not catch an answer that fluently says "I'm not sure".
  The heuristic score tops out at `heuristic_ceiling` (0.9): a plainly worded
  answer is not thereby a correct one.
* FOK: the isolated meta-context call's KNOWN / PARTIAL / UNKNOWN with a 0–1
  confidence (src/metacognition/calls.py). The number is clipped into its
  label's band (KNOWN 0.6–1, PARTIAL 0.3–0.7, UNKNOWN 0–0.35): verbalized
  numbers run overconfident, so the categorical judgement wins a disagreement.
* verbalized: a confidence the answer states ("Confidence: 0.7", "I'm 80%
  sure", "I'm fairly sure"), or None. Explicit numbers beat phrases (the last
  number counts: the model's final word); among phrases the lowest level counts.

A missing signal (no FOK in reflex mode or after a failed call, no stated
confidence) drops out and the remaining weights are renormalised, so
C = Σ wᵢ·sᵢ / Σ wᵢ over the available signals: a missing signal is unknown, not 0.

Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from src.metacognition.prompts import VERBALIZED_CONFIDENCE_INSTRUCTION, Judgement, weaknesses
from src.metacognition.settings import ConfidenceWeights, MetacognitionSettings

FOK_BANDS: Mapping[str, tuple[float, float]] = {
    "KNOWN": (0.6, 1.0), "PARTIAL": (0.3, 0.7), "UNKNOWN": (0.0, 0.35),
}


@dataclass(frozen=True)
class FeelingOfKnowing:
    """The meta call's answer; `value` None when there is none (`skipped` says why)."""

    judgement: Judgement | None
    value: float | None
    skipped: str | None = None

    @classmethod
    def unavailable(cls, reason: str) -> FeelingOfKnowing:
        return cls(None, None, reason)


@dataclass(frozen=True)
class Confidence:
    composite: float
    objective: float
    fok: float | None
    verbalized: float | None
    signals: Mapping[str, Any] = field(default_factory=dict)

    @property
    def fok_unknown(self) -> bool:
        """The feeling of knowing judged the question UNKNOWN (kept in `signals`)."""
        return self.signals.get("fok_judgement") == "UNKNOWN"


# --- structural heuristics ---------------------------------------------------------------

_STRONG_HEDGES = (
    r"i'?m not (?:entirely |completely |totally |really |very )?(?:sure|certain)",
    r"i am not (?:entirely |completely |totally |really |very )?(?:sure|certain)",
    r"not (?:entirely |completely |totally )?certain", r"i(?: do|)n'?t know", r"i do not know",
    r"no idea", r"can(?:'|no)t be (?:sure|certain)", r"hard to say", r"unclear",
    r"i'?m unsure", r"i (?:may|might|could) be wrong", r"don'?t quote me",
    r"i can(?:'|no)t (?:say|tell) (?:for sure|for certain|with certainty)",
)
_WEAK_HEDGES = (
    r"i think", r"i believe", r"maybe", r"perhaps", r"possibly", r"probably", r"likely",
    r"might", r"may be", r"could be", r"it seems", r"seems? (?:like|to)", r"appears? to",
    r"i guess", r"i suppose", r"roughly", r"approximately",
    r"as far as i know", r"if i (?:recall|remember) (?:correctly|right)?", r"not entirely",
    r"somewhat", r"arguably", r"presumably", r"i'?d guess", r"my guess",
)
# Strong alternatives first: at each position the first alternative that matches wins,
# so "I might be wrong" counts once, as strong, not also as "might".
_HEDGE = re.compile(
    r"\b(?:(?P<strong>" + "|".join(_STRONG_HEDGES) + r")|(?P<weak>" + "|".join(_WEAK_HEDGES) + r"))\b",
    re.IGNORECASE)
_SELF_CORRECTION = re.compile(
    r"(?:\bactually(?=,)|(?:^|[.!?,;]\s*)(?:wait|hmm|hold on|no,? wait)[,.!]|\bi mean\b|\bon second thought\b|"
    r"\bscratch that\b|\blet me (?:correct|rephrase|reconsider|start over)\b|\bi was wrong\b|"
    r"\bcorrection:|\bi misspoke\b|\bi stand corrected\b|\bor rather\b)",
    re.IGNORECASE | re.MULTILINE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"\w+")
# The confidence statement as small models write it (issue 27: few replies of a 1.5B
# model had the exact line): "Confidence: 0.8", "**Confidence:** 80%", "Confidence level -
# high", "(confidence = 8/10)". Markdown emphasis and a list or quote mark are allowed.
_MARK = r"[*_`]*"
_LEVELS: tuple[tuple[str, float], ...] = (
    (r"very\s+high", 0.9), (r"very\s+low", 0.1), (r"high", 0.8), (r"medium|moderate", 0.5), (r"low", 0.2))
_LEVEL = "|".join(p for p, _ in _LEVELS)
_STATED = (r"\(?\s*" + _MARK + r"confidence(?:\s+(?:level|score|rating))?" + _MARK
           + r"\s*(?:[:=\-\u2013\u2014]|\bis\b)\s*" + _MARK + r"\s*(?:about\s+|around\s+|~\s*)?"
           + r"(?:(?:\d+(?:\.\d+)?|\.\d+)\s*(?:%|/\s*10{1,2}\b|out\s+of\s+10{1,2}\b)?|(?:" + _LEVEL + r")\b)"
           + r"\s*" + _MARK + r"\s*\)?\.?")
# a line that is only the statement, anywhere; or one that ends the text after the answer
_CONFIDENCE_LINE = re.compile(r"^[ \t>#*-]*" + _STATED + r"[ \t]*(?:\n|$)", re.IGNORECASE | re.MULTILINE)
_CONFIDENCE_TAIL = re.compile(r"(?<=[.!?)\]\"'])[ \t]+" + _STATED + r"[ \t]*$", re.IGNORECASE)
#: A last sentence that is the confidence said in words about the reply or the speaker, not about
#: what was asked: "I am confident in my abilities." (a 1.5B model ended every reply with it,
#: asked for a `Confidence:` line, issue 38's script), "I'm fairly sure of this."
_CONFIDENCE_WORDS_TAIL = re.compile(
    r"(?:^|(?<=[.!?]))\s*(?:i'?m|i am)\s+(?:\w+\s+)?(?:confident|sure|certain)\s+(?:in|of|about)\s+"
    r"(?:my|this|the|that|these)(?:\s+(?:abilities|ability|answer|reply|response|skills|knowledge))?[ \t]*[.!]?[ \t]*$",
    re.IGNORECASE)


def _sentences(text: str) -> list[str]:
    return [s for s in (p.strip() for p in _SENTENCE_END.split(text)) if _WORD.search(s)]


def structural_signals(text: str, expected_words: int | None = None,
                       settings: MetacognitionSettings | None = None) -> dict[str, Any]:
    """Counts and penalties (each penalty in [0, 1]) of the four structural heuristics.

    hedging = 1 - exp(-2·h/s) with h = weighted hedges (a strong hedge such as
    "I'm not sure" counts 2) and s = sentences: one hedge in a one-sentence answer
    is a large penalty, one in ten sentences a small one. self_correction likewise
    with markers ("actually,", "wait", "I mean", "scratch that"). questions = the
    share of sentences that end in "?". length = |ln(words/expected)| / ln(ratio),
    capped at 1 (0 when no expected length is known).
    """
    cfg = settings or MetacognitionSettings()
    body = strip_verbalized_confidence(text)
    sentences = _sentences(body)
    n = max(1, len(sentences))
    words = len(_WORD.findall(body))
    hedges = list(_HEDGE.finditer(body))
    strong = sum(1 for m in hedges if m.group("strong"))
    weak = len(hedges) - strong
    corrections = [m.group(0).strip(" ,.;:!?\n") for m in _SELF_CORRECTION.finditer(body)]
    questions = sum(1 for s in sentences if s.rstrip().endswith("?"))
    length = 0.0
    if expected_words and words:
        length = min(1.0, abs(math.log(words / expected_words)) / math.log(cfg.length_anomaly_ratio))
    elif expected_words and not words:
        length = 1.0
    return {
        "sentences": float(len(sentences)), "words": float(words),
        "hedges_strong": float(strong), "hedges_weak": float(weak),
        "self_corrections": float(len(corrections)), "questions": float(questions),
        "hedge_phrases": [m.group(0) for m in hedges], "correction_markers": corrections,
        "hedging": 1.0 - math.exp(-2.0 * (2 * strong + weak) / n),
        "self_correction": 1.0 - math.exp(-2.0 * len(corrections) / n),
        "question_rate": questions / n,
        "length_anomaly": length,
    }


def heuristic_confidence(signals: Mapping[str, Any], settings: MetacognitionSettings | None = None) -> float:
    """ceiling · (1 - weighted penalties), in [0, ceiling]; 0 for an empty answer."""
    cfg = settings or MetacognitionSettings()
    if signals["words"] == 0:
        return 0.0
    h = cfg.heuristics
    penalty = (h.hedging * signals["hedging"] + h.self_correction * signals["self_correction"]
               + h.questions * signals["question_rate"] + h.length * signals["length_anomaly"])
    return cfg.heuristic_ceiling * max(0.0, 1.0 - penalty)


def logprob_confidence(mean_logprob: float) -> float:
    """exp(mean token logprob): the geometric-mean probability of the chosen tokens."""
    if math.isnan(mean_logprob):
        raise ValueError("mean logprob is NaN")
    return min(1.0, math.exp(min(0.0, mean_logprob)))


def objective_confidence(text: str, mean_logprob: float | None = None, expected_words: int | None = None,
                         settings: MetacognitionSettings | None = None) -> tuple[float, dict[str, Any]]:
    """The objective signal and the measurements behind it."""
    cfg = settings or MetacognitionSettings()
    signals = structural_signals(text, expected_words, cfg)
    heuristic = heuristic_confidence(signals, cfg)
    signals["heuristic"] = heuristic
    if mean_logprob is None:
        return heuristic, signals
    lp = logprob_confidence(mean_logprob)
    signals["mean_logprob"] = mean_logprob
    signals["logprob_confidence"] = lp
    return cfg.logprob_share * lp + (1 - cfg.logprob_share) * heuristic, signals


# --- verbalized confidence ---------------------------------------------------------------

_NUMBER = r"(\d{1,3}(?:\.\d+)?|\.\d+)"
_EXPLICIT = re.compile(
    r"\bconfidence(?:\s+(?:level|score|rating))?" + _MARK + r"\s*(?:[:=\-\u2013\u2014]|\bis\b|\bof\b)?\s*"
    + _MARK + r"\s*(?:about\s+|around\s+|~\s*)?"
    + _NUMBER + r"\s*(%|/\s*10\b|/\s*100\b|out of 10\b)?"
    r"|\b(?:i'?m|i am)\s+(?:about\s+|around\s+)?" + _NUMBER + r"\s*%\s*(?:sure|confident|certain)\b",
    re.IGNORECASE)
_PHRASES: tuple[tuple[str, float], ...] = (
    (r"i(?: do|)n'?t know|i do not know|no idea|no way (?:of|to) know", 0.1),
    (r"(?:i'?m|i am) not (?:entirely |completely |totally |really |very )?(?:sure|certain|confident)"
     r"|not (?:entirely |completely )?certain|(?:i'?m|i am) unsure|i guess|hard to say", 0.35),
    (r"(?:i'?m|i am) (?:fairly|pretty|quite|reasonably|moderately) (?:sure|certain|confident)", 0.75),
    (r"(?:i'?m|i am) (?:absolutely |completely |totally |very )?(?:sure|certain|confident)"
     r"|i know for (?:sure|a fact)", 0.9),
    (r"i think|i believe|probably|most likely", 0.6),
)
_PHRASE = re.compile(r"\b(?:" + "|".join(f"(?P<p{i}>{p})" for i, (p, _) in enumerate(_PHRASES)) + r")\b",
                     re.IGNORECASE)
_STATED_LEVEL = re.compile(
    r"\bconfidence(?:\s+(?:level|score|rating))?" + _MARK + r"\s*(?:[:=\-\u2013\u2014]|\bis\b)\s*" + _MARK
    + r"\s*(?:" + "|".join(f"(?P<l{i}>{p})" for i, (p, _) in enumerate(_LEVELS)) + r")\b", re.IGNORECASE)


def _explicit_value(number: str, unit: str | None) -> float | None:
    value = float(number)
    unit = (unit or "").replace(" ", "").lower()
    if unit == "%" or unit == "/100":
        value /= 100
    elif unit in ("/10", "outof10"):
        value /= 10
    elif value > 1:
        value /= 100  # "confidence: 70"
    return value if 0.0 <= value <= 1.0 else None


def verbalized_confidence(text: str) -> float | None:
    """The confidence the text states, in [0, 1], or None when it states none: a number
    (the last one), else a stated level ("Confidence: high" 0.8), else a phrase (the lowest)."""
    numbers = []
    for m in _EXPLICIT.finditer(text):
        number, unit = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), "%")
        value = _explicit_value(number, unit)
        if value is not None:
            numbers.append(value)
    if numbers:
        return numbers[-1]
    stated = [_LEVELS[int(m.lastgroup[1:])][1] for m in _STATED_LEVEL.finditer(text) if m.lastgroup]
    if stated:
        return stated[-1]
    levels = [_PHRASES[int(m.lastgroup[1:])][1] for m in _PHRASE.finditer(text) if m.lastgroup]
    return min(levels) if levels else None


def strip_verbalized_confidence(text: str) -> str:
    """The answer without its confidence statement (the user need not see it): every line
    that is only one ("**Confidence:** 80%"), one that ends the last line, and a last sentence
    that says it in words of the reply or the speaker ("I am confident in my abilities.")."""
    bare = _CONFIDENCE_TAIL.sub("", _CONFIDENCE_LINE.sub("", text).rstrip()).rstrip()
    # all there was may be that sentence: then there was no answer (answer_form: empty)
    return _CONFIDENCE_WORDS_TAIL.sub("", bare).rstrip()


# --- composite ---------------------------------------------------------------------------

def fok_value(judgement: Judgement, confidence: float) -> float:
    """The meta call's confidence clipped into its judgement's band."""
    low, high = FOK_BANDS[judgement]
    return min(high, max(low, float(confidence)))


def composite_confidence(objective: float | None, fok: float | None, verbalized: float | None,
                         weights: ConfidenceWeights | None = None) -> float:
    """Σ wᵢ·sᵢ / Σ wᵢ over the signals that exist (0.5 / 0.35 / 0.15 when all do)."""
    w = weights or ConfidenceWeights()
    parts = [(w.objective, objective), (w.fok, fok), (w.verbalized, verbalized)]
    available = [(wi, si) for wi, si in parts if si is not None and wi > 0]
    for _, si in available:
        if not 0.0 <= si <= 1.0:
            raise ValueError(f"confidence signals must be in [0, 1], got {si!r}")
    if not available:
        raise ValueError("composite confidence needs at least one signal")
    return sum(wi * si for wi, si in available) / sum(wi for wi, _ in available)


def score_answer(text: str, fok: FeelingOfKnowing | None = None, *, mean_logprob: float | None = None,
                 expected_words: int | None = None,
                 settings: MetacognitionSettings | None = None) -> Confidence:
    """Composite confidence of one answer, with every signal kept for the logs."""
    cfg = settings or MetacognitionSettings()
    objective, signals = objective_confidence(text, mean_logprob, expected_words, cfg)
    verbalized = verbalized_confidence(text)
    fok_v = fok.value if fok else None
    composite = composite_confidence(objective, fok_v, verbalized, cfg.weights)
    out: dict[str, Any] = dict(signals)
    out["fok_judgement"] = fok.judgement if fok else None
    if fok and fok.skipped:
        out["fok_skipped"] = fok.skipped
    return Confidence(composite, objective, fok_v, verbalized, out)


__all__ = [
    "FOK_BANDS", "VERBALIZED_CONFIDENCE_INSTRUCTION", "Confidence",
    "FeelingOfKnowing", "Judgement",
    "composite_confidence", "fok_value", "heuristic_confidence", "logprob_confidence",
    "objective_confidence", "score_answer", "strip_verbalized_confidence", "structural_signals",
    "verbalized_confidence", "weaknesses",
]
