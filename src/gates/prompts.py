"""What the gates ask a model (plan §2.8): the contradiction micro-call, layer 3.

One isolated meta-context question (src/gates/contradiction.py asks it for the exit
gate, the light ticker's contradiction scan asks the same): the two statements and
nothing else. The same answer carries the one-line `compressed` summary of A, so the
exit gate never makes an extra call for its compression. For a user's statement the gate
asks `relations_question` instead: one call about the earlier statements of theirs it
weighs, which also tells an update (src/gates/updates.py) from a contradiction.
"""

from __future__ import annotations

from collections.abc import Sequence

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


class RelationsAnswer(BaseModel):
    """Layer 3 for a user's new statement and earlier ones of theirs (issue 37 item 3): one call
    tells which earlier statement it updates and which it contradicts, and carries A as one
    line, as the contradiction call does."""

    updates: int = Field(description="the number of the earlier statement A replaces because that thing "
                                     "changed since (a move, a new job, a new car, a new time, a new "
                                     "partner, a changed preference); 0 if A replaces none")
    contradicts: list[int] = Field(default_factory=list,
                                   description="the numbers of the earlier statements that cannot be true "
                                               "together with A at any time; [] if none")
    summary_a: str = Field(description="statement A as one line of at most 15 words")
    about: str = Field("", description="what A tells about its speaker: a noun phrase of 1 to 4 words "
                                       "naming the thing that could change (e.g. \"my car\")")


def relations_question(a: str, earlier: Sequence[str]) -> str:
    """The isolated question for a user's new statement A and earlier ones of theirs, numbered
    from 1 (each on one line)."""
    lines = "\n".join(f"{k}. {' '.join(b[:QUESTION_CHARS].split())}" for k, b in enumerate(earlier, 1))
    return (f"Statement A: {' '.join(a[:QUESTION_CHARS].split())}\n"
            f"Earlier statements:\n{lines}\n"
            "The same person said the numbered statements earlier and A now. Give `updates`: the number "
            "of the earlier statement A replaces because that thing changed since (a move, a new job, a "
            "new car, a new time, a new partner, a changed preference), or 0 if A replaces none of them. "
            "Give `contradicts`: the numbers of the earlier statements that cannot be true together with "
            "A at any time, [] if none (one A adds to, or one about something else, is neither). Also "
            "give `summary_a`: statement A as one line of at most 15 words; and `about`: what statement "
            "A tells about its speaker, as a short noun phrase of 1 to 4 words naming the thing that "
            "could change or be said again later (for example: \"my car\", \"my employer\", \"my "
            "sister's home city\", \"my dentist appointment\", \"my coffee order\").")
