"""The output cap of a structured reply, sized from its schema and its item count (issue 38 item 6).

One cap for every reply (`providers.llm.max_output_tokens`, 512) cut a small model's
insight replies (five insights, each with its citations) in the middle of their JSON; the
repair round was asked at the same cap and cut again, and the answers were lost. A reply's
size follows from what it must hold, so its cap does too:

    cap = ceil(MARGIN × tokens(schema, items)) + OVERHEAD

where `tokens` walks the JSON Schema the endpoint is sent (pydantic's `model_json_schema`,
`$ref`s resolved): a string takes its `maxLength` characters (else what its description
asks for, `STRING_CHARS`) at `CHARS_PER_TOKEN`, a number or a boolean `SCALAR_TOKENS`, an object its properties and their
quoted keys, and an array its `maxItems` entries (else `items` for the outermost array, the
one a batch answers with one entry per item or a question with its `n` insights; an array
inside an array's entries, such as an insight's cited ids, `NESTED_ITEMS`). A cap above what the model's window
allows a reply is the caller's sign to ask about fewer items at a time
(src/consolidation/deep/structured.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import pydantic

#: Characters of JSON text per token: English words run about 4 per token; quotes, ids and
#: punctuation fewer.
CHARS_PER_TOKEN = 3.5
#: The characters a string is given when its schema has no `maxLength`: what its description
#: asks for ("at most 15 words": `WORD_CHARS` each; "one sentence"), else one or two sentences.
STRING_CHARS = 300
SENTENCE_CHARS = 200
WORD_CHARS = 8
_AT_MOST_WORDS = re.compile(r"\bat most (\d+) words\b", re.IGNORECASE)
_ONE_SENTENCE = re.compile(r"\bone sentence\b", re.IGNORECASE)
#: A number, an id or a boolean, with its separator.
SCALAR_TOKENS = 3
#: Entries of a nested array with no `maxItems` (an insight's cited ids).
NESTED_ITEMS = 8
#: Headroom over the estimate (a model's sentence runs long), and the braces and whitespace.
MARGIN = 1.25
OVERHEAD = 16


def reply_tokens(schema: type[pydantic.BaseModel] | Mapping[str, Any], items: int = 1) -> int:
    """The output cap of a reply matching `schema` (a pydantic model or its JSON Schema) that
    holds `items` entries in its outermost array (module docstring)."""
    js = schema.model_json_schema() if isinstance(schema, type) else schema
    defs = js.get("$defs") or {}
    return math.ceil(MARGIN * _tokens(js, defs, max(1, items), outer=True)) + OVERHEAD


def _resolve(node: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return defs.get(ref.removeprefix("#/$defs/"), {})
    return node


def _chars(node: Mapping[str, Any]) -> int:
    """The characters a string field is given (see `STRING_CHARS`); an enum's longest value."""
    if "maxLength" in node:
        return int(node["maxLength"])
    if "enum" in node or "const" in node:
        return max(len(str(v)) for v in node.get("enum", [node.get("const")])) + 2
    said = str(node.get("description") or "")
    if words := _AT_MOST_WORDS.search(said):
        return int(words.group(1)) * WORD_CHARS
    return SENTENCE_CHARS if _ONE_SENTENCE.search(said) else STRING_CHARS


def _tokens(node: Mapping[str, Any], defs: Mapping[str, Any], items: int, *, outer: bool) -> float:
    node = _resolve(node, defs)
    options = node.get("anyOf") or node.get("oneOf")
    if options:                              # a union: the largest of its options
        return max(_tokens(o, defs, items, outer=outer) for o in options)
    kind = node.get("type")
    if kind == "string" or "enum" in node or "const" in node:
        return _chars(node) / CHARS_PER_TOKEN + 2
    if kind == "array":
        count = node.get("maxItems", items if outer else NESTED_ITEMS)
        each = _tokens(node.get("items") or {}, defs, items, outer=False)
        return count * (each + 1) + 2
    if kind == "object" or "properties" in node:
        props = node.get("properties") or {}
        return 2.0 + sum(len(key) / CHARS_PER_TOKEN + 3 + _tokens(value, defs, items, outer=outer)
                         for key, value in props.items())
    if kind in ("integer", "number", "boolean", "null"):
        return SCALAR_TOKENS
    return STRING_CHARS / CHARS_PER_TOKEN        # an untyped value: as much as a string


__all__ = ["CHARS_PER_TOKEN", "MARGIN", "NESTED_ITEMS", "OVERHEAD", "SCALAR_TOKENS", "SENTENCE_CHARS",
           "STRING_CHARS", "WORD_CHARS", "reply_tokens"]
