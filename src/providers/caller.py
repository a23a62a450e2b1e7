"""Whose a model call is: its priority at the endpoint and the budget it counts against.

Every `LanguageModel` call says it (`caller=`): the user's turn goes first at a model
endpoint (src/providers/endpoint_gate.py) and is nobody's background spending; the mind's
own work (the DMN's and the gut's impulses, consolidation) waits behind it and counts
against the background budget (src/providers/budget.py) under its name, which the ledger
writes into `llm_calls.caller`. A call that says nothing is internal and nobody's (the exit
gate's micro-calls, skill drafting for consolidation).

A model whose every call is one caller's (consolidation's, the guardian's /skill drafts)
is a `ChargedModel` (src/providers/charged.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Priority = Literal["user", "internal"]

#: Internal work whose calls the background budget counts; the first two are "idle thought".
IDLE_THOUGHT = frozenset({"dmn", "gut"})
BACKGROUND = IDLE_THOUGHT | {"consolidation"}


@dataclass(frozen=True)
class Caller:
    """Whose call: `priority` at the model endpoint, `charge` the internal work whose
    background budget it counts against (None: nobody's)."""

    priority: Priority = "internal"
    charge: str | None = None


USER = Caller("user")
INTERNAL = Caller()
CONSOLIDATION = Caller("internal", "consolidation")


def background_caller(source: str | None) -> str | None:
    """`source` when it is internal work the budget counts (dmn, gut, consolidation), else None."""
    return source if source in BACKGROUND else None


def caller_for(source: str | None) -> Caller:
    """The caller of a turn whose winner came from `source`: the user's turn goes first and
    is nobody's spending; an impulse of internal work waits and is charged to it."""
    if source == "user":
        return USER
    return Caller("internal", background_caller(source))
