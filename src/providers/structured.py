"""Structured output: the schema sent with the request, finding JSON in a reply, coercing
the trivial mismatches small models make, validating with pydantic.

A structured call carries its answer schema twice: as text in the system prompt
(`schema_instruction`, src/providers/prompts.py: every model reads it) and, where the
endpoint takes one, as a machine-readable `ResponseSchema` (OpenAI-compatible
`response_format: json_schema`, which llama.cpp's server turns into a grammar; Gemini's
`response_json_schema`). An endpoint that refuses the schema (`schema_refused`) is asked
with plain JSON mode from then on (the wrapper remembers it per model,
src/providers/llm.py).

A reply is then coerced before validation (`coerce`), driven by the pydantic model's
field types: a list of strings where a string is expected becomes its lines joined, a
number where a string is expected its text, a numeric string where a number is expected
the number ("80%" -> 0.8), a single item where a list is expected a list of one, a
one-element list where an object is expected its element, a Literal matched without
regard to case. Anything else is left for pydantic to refuse; the one repair round-trip
lives in `llm.ResilientLanguageModel`, its text (`repair_prompt`) in prompts.py.
"""

from __future__ import annotations

import json
import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pydantic

from src.errors import MalformedOutput, ProviderRejected
from src.providers.http_errors import short
from src.providers.prompts import repair_prompt, schema_instruction
from src.providers.protocols import M

_FENCE = re.compile(r"^```(?:json|JSON)?\s*\n?(.*?)\n?```$", re.DOTALL)
#: What an endpoint's refusal of the schema says (OpenAI: "Invalid schema for response_format",
#: llama.cpp: "response_format type must be one of ...", a grammar it cannot build; Gemini:
#: response_json_schema / responseJsonSchema).
_SCHEMA_REFUSAL = re.compile(r"schema|response_format|grammar", re.IGNORECASE)
_NAME = re.compile(r"[^A-Za-z0-9_-]")
_PERCENT = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*%\s*$")


@dataclass(frozen=True)
class ResponseSchema:
    """The answer schema as an endpoint takes it: a name, the JSON Schema, and whether the
    endpoint may enforce it strictly (OpenAI's strict mode needs every property required
    and no additional properties, which a model with defaults does not meet)."""

    name: str
    schema: Mapping[str, Any]
    strict: bool


def response_schema(model: type[pydantic.BaseModel]) -> ResponseSchema:
    """The `ResponseSchema` of a pydantic model (its `model_json_schema`)."""
    schema = model.model_json_schema()
    return ResponseSchema(_NAME.sub("_", model.__name__)[:64] or "answer", schema, _strict_ready(schema))


def _strict_ready(schema: Mapping[str, Any]) -> bool:
    """Every object in `schema` requires all its properties and forbids others."""
    objects = [schema, *(schema.get("$defs") or {}).values()]
    for obj in objects:
        if obj.get("type") != "object":
            continue
        if set(obj.get("required", ())) != set(obj.get("properties", {})):
            return False
        if obj.get("additionalProperties") is not False:
            return False
    return True


def schema_refused(error: BaseException) -> bool:
    """Whether a provider error is the endpoint refusing the response schema (a 4xx that
    names it), so the call is worth repeating with plain JSON mode."""
    return isinstance(error, ProviderRejected) and bool(_SCHEMA_REFUSAL.search(str(error)))


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


# --- coercion ------------------------------------------------------------------------------

def coerce(data: Any, model: type[pydantic.BaseModel]) -> Any:
    """`data` (decoded JSON) with the trivial mismatches against `model` fixed (module doc)."""
    if isinstance(data, list) and len(data) == 1 and isinstance(data[0], dict):
        data = data[0]
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for name, field in model.model_fields.items():
        key = next((k for k in (name, field.alias) if k is not None and k in out), None)
        if key is not None:
            out[key] = _coerce(out[key], field.annotation)
    return out


def _coerce(value: Any, annotation: Any) -> Any:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _coerce(value, args[0])
    if origin is Union or origin is types.UnionType:
        options = [a for a in args if a is not type(None)]
        if value is None or len(options) != 1:
            return value            # several types fit: pydantic chooses, unchanged
        return _coerce(value, options[0])
    if origin is Literal:
        return _literal(value, args)
    if origin in (list, tuple, set, frozenset, Sequence):
        item = args[0] if args and args[0] is not Ellipsis else Any
        items = value if isinstance(value, list) else [value]
        return [_coerce(v, item) for v in items] if item is not Any else items
    if annotation is str:
        return _text(value)
    if annotation in (int, float):
        return _number(value)
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return coerce(value, annotation)
    return value


def _text(value: Any) -> Any:
    """A string for a field that wants one: lines of a list, the text of a number."""
    if isinstance(value, list):
        parts = [_text(v) for v in value]
        return "\n".join(p if isinstance(p, str) else json.dumps(p) for p in parts)
    if isinstance(value, dict):
        return " ".join(str(_text(v)) for v in value.values())
    if isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, int | float):
        return str(value)
    return value


def _number(value: Any) -> Any:
    """A number from a numeric string ("0.8", "80%" -> 0.8); anything else unchanged."""
    if not isinstance(value, str):
        return value
    percent = _PERCENT.match(value)
    if percent:
        return float(percent.group(1)) / 100
    try:
        return float(value.strip()) if re.search(r"[.eE]", value) else int(value.strip())
    except ValueError:
        return value


def _literal(value: Any, options: tuple) -> Any:
    if isinstance(value, str) and value not in options:
        folded = {str(o).casefold(): o for o in options}
        return folded.get(value.strip().casefold(), value)
    return value


def parse_structured(text: str, schema: type[M]) -> M:
    """Validate a reply against `schema` after coercion; MalformedOutput says what was wrong."""
    if not text.strip():
        raise MalformedOutput(f"empty reply where a {schema.__name__} JSON object was expected")
    raw = extract_json(text)
    try:
        try:
            data = json.loads(raw)
        except ValueError:
            return schema.model_validate_json(raw)   # pydantic says where the JSON breaks
        return schema.model_validate(coerce(data, schema))
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()[:3])
        # not chained: pydantic's own text quotes the reply (input_value=), and a logged
        # traceback prints every chained error (issue 39); `problems` says what was wrong
        raise MalformedOutput(f"reply is not a valid {schema.__name__}: {short(problems)}") from None


__all__ = ["ResponseSchema", "coerce", "extract_json", "parse_structured", "repair_prompt",
           "response_schema", "schema_instruction", "schema_refused"]
