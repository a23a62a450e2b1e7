"""The texts every model call may carry, whoever makes it (issue 23 item 4).

A meta-context call (plan §2.8, §2.11) has only `META_SYSTEM` and its question; a
structured call adds `schema_instruction` to its system prompt, and a malformed reply
gets one `repair_prompt` after the model's own reply (`EMPTY_REPLY` when it said
nothing: providers refuse an empty assistant turn). Each stage's own questions sit in
its package's `prompts.py`.
"""

from __future__ import annotations

import json

import pydantic

# Meta-context calls carry no identity: only this neutral instruction and the question.
META_SYSTEM = ("You are a careful, neutral evaluator. Answer only the question you are given, "
               "as briefly as it allows. You have no other context.")
#: Stands in for an empty reply sent back to the model as its own turn.
EMPTY_REPLY = "(empty reply)"


def schema_instruction(schema: type[pydantic.BaseModel]) -> str:
    """The system-prompt paragraph that asks for one JSON object matching `schema`."""
    spec = json.dumps(schema.model_json_schema(), separators=(",", ":"), sort_keys=True)
    return ("Reply with exactly one JSON object and nothing else (no prose, no code fence). "
            f"It must match this JSON Schema: {spec}")


def repair_prompt(error: object) -> str:
    """The follow-up message of the single repair attempt; `error` says what was wrong."""
    return (f"Your previous reply could not be used: {error}. "
            "Reply again with only the corrected JSON object.")
