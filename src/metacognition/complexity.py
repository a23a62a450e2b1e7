"""How multi-step a request is (plan §3.6's complexity trigger): distinct step and planning
markers, enumerated items, questions beyond the first, and length, in [0, 1)."""

from __future__ import annotations

import math
import re

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
