"""Structured output: asking for JSON, finding it in a reply, validating it with pydantic.

Pure functions; the one repair round-trip lives in `llm.ResilientLanguageModel`, the texts
(`schema_instruction`, `repair_prompt`) in `src/providers/prompts.py`.
"""

from __future__ import annotations

import re

import pydantic

from src.errors import MalformedOutput
from src.providers.http_errors import short
from src.providers.prompts import repair_prompt, schema_instruction
from src.providers.protocols import M

_FENCE = re.compile(r"^```(?:json|JSON)?\s*\n?(.*?)\n?```$", re.DOTALL)


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


__all__ = ["extract_json", "parse_structured", "repair_prompt", "schema_instruction"]
