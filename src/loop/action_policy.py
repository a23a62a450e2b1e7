"""The action check of the output pipeline (plan §3.4): hard safety on source tags.

Processing is source-agnostic; acting is not. An output may be:
    communicate      say something to the user
    read_doc         read the mind's own source and notes (read-only tool)
    internal         update the mind's own state (no effect outside the process), e.g.
                     declaring a goal achieved (the `GOAL_ACHIEVED: <goal>` verb)
    external_effect  anything that changes the world outside (none exists yet; the
                     check is here so the first one cannot be added without it)

Externally prompted actions (source tag `external_*`) pass on ordinary confidence;
self-generated impulses (`internal_*`: DMN, consolidation, gut, scheduled) need more.
A tool call is checked before it runs (src/loop/thinking.py passes the check to the tool
protocol as `permit`, on the confidence of the reply that carries the call); the
thought_log row repeats the verdict for every call of the cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from src.loop.settings import ActionSettings

ActionKind = Literal["communicate", "read_doc", "internal", "external_effect"]


class ActionPolicy:
    """The action check with its confidence floors (`loop.actions` in runtime.yaml)."""

    def __init__(self, settings: ActionSettings | None = None):
        self.settings = settings or ActionSettings()

    def allows(self, kind: ActionKind, source_tag: str, source_confidence: float,
               confidence: float | None) -> tuple[bool, str]:
        """(allowed, reason). `confidence` is the composite confidence of the output."""
        cfg = self.settings
        external = source_tag.startswith("external_") and source_confidence >= cfg.trusted_source_confidence
        conf = 0.0 if confidence is None else confidence
        if kind == "internal":
            return True, "internal actions change only the mind's own state"
        if kind == "read_doc":
            return True, "reading its own docs is read-only"
        if kind == "communicate":
            if external:
                return True, f"answering {source_tag}"
            if conf >= cfg.internal_communicate_confidence:
                return True, (f"self-generated ({source_tag}) and confident "
                              f"({conf:.2f} >= {cfg.internal_communicate_confidence:.2f})")
            return False, (f"self-generated ({source_tag}) thought kept internal: confidence "
                           f"{conf:.2f} < {cfg.internal_communicate_confidence:.2f}")
        need = cfg.external_effect_confidence if external else cfg.internal_external_effect_confidence
        if conf >= need:
            return True, f"external effect from {source_tag} at confidence {conf:.2f} >= {need:.2f}"
        return False, f"external effect from {source_tag} refused: confidence {conf:.2f} < {need:.2f}"


def checked_tool_actions(policy: ActionPolicy, tool_actions: list[dict], kind_of: Callable[[str], str],
                         source_tag: str, source_confidence: float, confidence: float | None) -> list[dict]:
    """The cycle's tool calls with the action check's verdict on each. `kind_of` gives a
    verb's action kind (each protocol verb declares its own: `ToolVerb.kind`)."""
    out = []
    for action in tool_actions:
        kind = kind_of(action.get("verb", ""))
        allowed, why = policy.allows(kind, source_tag, source_confidence, confidence)
        out.append({**action, "action_kind": kind, "allowed": allowed, "reason": why})
    return out
