"""Structured output: asking for JSON, finding it in a reply, validating it with pydantic.

Pure functions; the one repair round-trip lives in `llm.ResilientLanguageModel`.
"""

from __future__ import annotations

import json
import re

import pydantic

from src.errors import MalformedOutput
from src.providers.http_errors import short
from src.providers.protocols import M

_FENCE = re.compile(r"^```(?:json|JSON)?\s*\n?(.*?)\n?```$", re.DOTALL)


def schema_instruction(schema: type[pydantic.BaseModel]) -> str:
    """The system-prompt paragraph that asks for one JSON object matching `schema`."""
    spec = json.dumps(schema.model_json_schema(), separators=(",", ":"), sort_keys=True)
    return ("Reply with exactly one JSON object and nothing else (no prose, no code fence). "
            f"It must match this JSON Schema: {spec}")


def extract_json(text: str) -> str:
    """The JSON object inside a reply: strips a code fence or prose around the braces."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    if stripped.startswith("{"):
        return stripped
    start, end = stripped.find("{"), stripped.rfind("}")
    if start != -1 and end > start:
        return stripped[start:end + 1]
    return stripped


def parse_structured(text: str, schema: type[M]) -> M:
    """Validate a reply against `schema`; MalformedOutput says what was wrong."""
    if not text.strip():
        raise MalformedOutput(f"empty reply where a {schema.__name__} JSON object was expected")
    try:
        return schema.model_validate_json(extract_json(text))
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()[:3])
        raise MalformedOutput(f"reply is not a valid {schema.__name__}: {short(problems)}") from exc


def repair_prompt(error: MalformedOutput) -> str:
    """The follow-up message of the single repair attempt."""
    return (f"Your previous reply could not be used: {error}. "
            "Reply again with only the corrected JSON object.")
