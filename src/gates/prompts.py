"""What the gates ask a model (plan §2.8): the contradiction micro-call, layer 3.

One isolated meta-context question (src/gates/contradiction.py asks it for the exit
gate, the light ticker's contradiction scan asks the same): the two statements and
nothing else. The same answer carries the one-line `compressed` summary of A, so the
exit gate never makes an extra call for its compression. For two of the user's own
statements the gate asks `relation_question` instead: the same one call, which also tells
an update (src/gates/updates.py) from a contradiction.
"""

from __future__ import annotations

from typing import Literal

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


class RelationAnswer(BaseModel):
    """Layer 3 for two of the user's own statements (issue 37 item 3): one call tells an update
    from a contradiction from neither, and carries A as one line, as the contradiction call does."""

    relation: Literal["update", "contradiction", "neither"] = Field(
        description="update: A replaces what B said (the same thing changed since: a move, a new job, "
                    "a new time); contradiction: A and B cannot both be true at any time; neither: both "
                    "can be true")
    summary_a: str = Field(description="statement A as one line of at most 15 words")


def relation_question(a: str, b: str) -> str:
    """The isolated question for a user's new statement A and an earlier one B of theirs."""
    return (f"Statement A: {a[:QUESTION_CHARS]}\n"
            f"Statement B: {b[:QUESTION_CHARS]}\n"
            "The same person said B earlier and A now. Give `relation`: \"update\" if A replaces what B said because something changed since "
            "(a move, a new job, a new time, a new partner, a changed preference); \"contradiction\" if A "
            "and B cannot both be true at any time; \"neither\" if both can be true (A adds to B or is "
            "about something else). Also give `summary_a`: statement A as one line of at most 15 words.")
