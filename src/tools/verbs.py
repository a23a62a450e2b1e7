"""What a protocol verb is (plan §4.10, and later verbs): its name, handler, offer and kind.

The types sit here, below both the tools that define verbs (`docs_verb.py`, the skills'
`RECALL_SKILL`, the inner life's `GOAL_ACHIEVED`) and the loop that runs them
(src/loop/tool_protocol.py), so that a tool never imports the loop to say what it offers.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

Handler = Callable[[str], str | Awaitable[str]]

_VERB = re.compile(r"^[A-Z][A-Z0-9_]*$")


def _always(_focus: str) -> bool:
    return True


def _error_result(result: str) -> bool:
    return result.startswith("error:")


@dataclass(frozen=True)
class ToolVerb:
    """One protocol verb: how to call it, when to use it, and what runs."""

    verb: str                                   # e.g. "READ_DOC"
    handler: Handler                            # argument -> result text (never raises)
    usage: str                                  # e.g. "READ_DOC: <relative path>"
    when: str                                   # one sentence: when (only) to use it
    offered: Callable[[str], bool] = _always    # is it offered for this focus?
    # the action check's kind (src/loop/action_policy.py): read_doc | internal | external_effect.
    # A verb that does not say is an external effect: the strictest check, and offering it
    # sends the turn to System 2 (the irreversibility trigger, src/loop/triggers.py).
    kind: str = "external_effect"
    refused: Callable[[str], bool] = _error_result

    def __post_init__(self) -> None:
        if not _VERB.match(self.verb):
            raise ValueError(f"a protocol verb is upper case letters, digits and _, got {self.verb!r}")
