"""What a cycle says when part of what it needs is unavailable (issue 11, Deliver 4).

A failing recall, context assembly, reflection lookup or cost line does not stop the
cycle: it answers without that part and says what is missing. When a whole cycle
keeps failing, the user is told after the retry budget — and "kept" is said only
when the message really is in the input journal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from src.text import excerpt


@dataclass
class NoContext:
    """Stands in for an assembled context when assembly failed: no memories and the
    full conversation budget (the missing line reaches the model with the prompt)."""

    budget: Any                 # the ContextBudget of the settings
    missing: str
    ids_by_track: dict[str, list[int]] = field(default_factory=dict)
    text: str = ""

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
