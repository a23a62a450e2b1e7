"""What a cycle says when part of what it needs is unavailable (issue 11, Deliver 4).

A failing recall, context assembly, reflection lookup or cost line does not stop the
cycle: it answers without that part and says what is missing. When a whole cycle
keeps failing, the user is told after the retry budget — and "kept" is said only
when the message really is in the input journal.

Such notices are said to the user and nothing else (issue 27): never a memory, never
in the conversation window, never said again unprompted. `is_failure_notice` knows
them by their words — also when a model copies one into an answer of its own (a small
model, shown "(I cannot answer in words right now…)" in its window, answered a thought
with it at high confidence).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from src.context.settings import ContextBudget
from src.loop.outage import DB_ERRORS, Outage, describe
from src.text import excerpt

log = logging.getLogger(__name__)

#: The words of the notices the loop says when it cannot answer: the reflex reply
#: (src/loop/prompts.py `reflex_reply`, with each reason src/loop/thinking.py gives it),
#: `failure_note` below and the outage's `waiting_note`.
FAILURE_NOTICE = re.compile(
    r"cannot answer in words|reflex mode —|no language model is configured"
    r"|language model (?:did not answer within|failed:|answered with a tool call)"
    r"|could not process your message|database is still unavailable", re.IGNORECASE)


def is_failure_notice(text: str | None) -> bool:
    """Whether `text` is (or copies) a failure or reflex notice of the loop."""
    return bool(text) and FAILURE_NOTICE.search(text) is not None


class Shortfalls:
    """What this cycle had to do without (one per cycle): the steps note a failing part
    here, the prompt and the reflex reply name it. A database error also marks the
    outage, so it is logged once, not once per cycle."""

    def __init__(self, outage: Outage):
        self.outage = outage
        self.missing: list[str] = []

    def note(self, what: str, exc: BaseException) -> None:
        """`what` is unavailable this cycle because of `exc`."""
        self.missing.append(f"{what} ({describe(exc)})")
        if isinstance(exc, DB_ERRORS):
            self.outage.down(what, exc)
        else:
            log.warning("%s unavailable this cycle: %s", what, exc)

    def line(self) -> str:
        """The line for the prompt and the reflex reply ("" when nothing is missing)."""
        return missing_line(self.missing)


@dataclass
class NoContext:
    """Stands in for an assembled context when assembly failed: no memories and the
    full conversation budget (the missing line reaches the model with the prompt)."""

    budget: ContextBudget
    missing: str
    ids_by_track: dict[str, list[int]] = field(default_factory=dict)
    text: str = ""
    writes: tuple = ()          # no memories placed: no co-access to write
    sections: tuple = ()        # no memory sections

    @property
    def conversation_budget(self) -> int:
        return self.budget.conversation_tokens

    def summary(self) -> dict[str, Any]:
        return {"degraded": self.missing}


def missing_line(missing: list[str]) -> str:
    """One line naming what this cycle had to do without."""
    if not missing:
        return ""
    return "(Unavailable this cycle, answering without it: " + "; ".join(missing) + ".)"


def failure_note(text: str, attempts: int, reason: str, kept: bool) -> str:
    """The reply for a message no cycle could process within the retry budget."""
    quoted = excerpt(text, 60)
    where = ("It is kept in the input journal and will be answered after the next start."
             if kept else "It was not kept; please send it again.")
    return (f"(I could not process your message \"{quoted}\" after {attempts} attempts: {reason}. "
            f"{where})")
