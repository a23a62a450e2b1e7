"""What the gates ask a model (plan §2.8): the contradiction micro-call, layer 3.

One isolated meta-context question (src/gates/contradiction.py asks it for the exit
gate, the light ticker's contradiction scan asks the same): the two statements and
nothing else. The same answer carries the one-line `compressed` summary of A, so the
exit gate never makes an extra call for its compression.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

#: Characters of each statement put into the LLM question.
QUESTION_CHARS = 1000


class ContradictionAnswer(BaseModel):
    """The micro-call's answer: the verdict and, for free, A as one line."""

    contradicts: bool = Field(description="true if statement A contradicts statement B (YES), else false (NO)")
    summary_a: str = Field(description="statement A as one line of at most 15 words")


def contradiction_question(a: str, b: str) -> str:
    """The isolated meta-context question: the two statements and nothing else."""
    return (f"Statement A: {a[:QUESTION_CHARS]}\n"
            f"Statement B: {b[:QUESTION_CHARS]}\n"
            "Does A contradict B? Answer YES or NO as `contradicts` (true = YES). "
            "Also give `summary_a`: statement A as one line of at most 15 words.")
