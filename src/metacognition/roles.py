"""Which model fills a role: is System 2 the same model as System 1? (issue 27 item 7)

With one local model configured for both roles, escalating sends System 1's own draft
back to the same weights under another name: a second call that costs what the first
did and knows nothing the first did not. `loop_before_escalate` keeps the draft then,
and its `escalations` row says why (src/metacognition/escalation.py).

A model is its provider, its model name and, for an OpenAI-compatible endpoint, the base
URL it is served from (`backend.base_url`): two llama.cpp servers with the same model file
on two machines are two System 2 candidates, the same model name at one URL is one.
"""

from __future__ import annotations

from typing import Any


def model_identity(llm: Any) -> tuple[str, str, str | None]:
    """(provider, model, base URL or None) of a LanguageModel."""
    backend = getattr(llm, "backend", None)
    return (str(getattr(llm, "provider", "")), str(getattr(llm, "model", "")),
            getattr(backend, "base_url", None))


def same_model(system1: Any, system2: Any) -> bool:
    """Whether both roles are filled by one configured model (the same object, or the same
    provider, model and base URL)."""
    if not (getattr(system1, "configured", False) and getattr(system2, "configured", False)):
        return False
    return system1 is system2 or model_identity(system1) == model_identity(system2)


__all__ = ["model_identity", "same_model"]
