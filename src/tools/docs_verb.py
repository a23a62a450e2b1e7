"""The docs tool as protocol verbs, `READ_DOC: <path>` and `LIST_DOCS: <directory>`,
and when they are offered.

The verb is offered only when the focus is about the mind itself or its code
(`about_self_or_code`). A tool line in every prompt invited a small local model to
answer "Hello! My name is Dana…" with `READ_DOC: /home/user/documents/placeholder.txt`;
ordinary conversation now never sees the tool. The matcher is deliberately narrow:
it asks for a second-person reference to the mind's workings ("your memory", "how do
you decide") or a file of the project (README, notes.md, src/…, *.py). "my code",
"my notes", "how are you?", "how do you think I should…", "how would you decide…"
(advice, not self) do not match: tests/test_docs_verb.py holds the labelled messages.

The verbs are registered even when the docs tool is disabled: they are then never
offered and refuse, but a reply carrying one is still recognised and never delivered.
"""

from __future__ import annotations

import re

from src.tools.prompts import LIST_DOCS_WHEN, read_doc_when
from src.tools.read_docs import DocsTool
from src.tools.verbs import ToolVerb

_WORKINGS = (r"memory|memories|mind|brain|architecture|design|gates?|loop|implementation|internals|"
             r"workings|source(?:\s+code)?|code(?:\s*base)?|codebase|notes|readme|docs|documentation|"
             r"files?|modules?|program|config(?:uration)?|recall|attention|consolidation|"
             r"reflection|escalation|fifo|context\s+window|system\s*[12]")
_MECHANISM_VERBS = (r"work|function|operate|run|built|made|designed|implemented|programmed|coded|"
                    r"remember|forget|recall|store|learn|decide|escalate|retrieve")
_ABOUT_SELF = re.compile(
    rf"\byour(?:\s+own)?\s+(?:{_WORKINGS})\b"
    rf"|\bhow\s+(?:do|does|did|are|were|is|can)\s+you(?:r\s+\w+)?\s+(?:\w+\s+)?(?:{_MECHANISM_VERBS})\b"
    r"|\b(?:readme(?:\.md)?|notes\.md|moltbot)\b"
    r"|(?:^|[\s`'\"(])src/"
    r"|\b[\w/]+\.py\b",
    re.IGNORECASE)


def about_self_or_code(focus: str) -> bool:
    """Whether a focus asks about the mind's own workings, code or notes."""
    return bool(_ABOUT_SELF.search(focus))


def read_doc_verb(docs: DocsTool | None) -> ToolVerb:
    """`READ_DOC: <path>` for the loop's ToolProtocol; offered only for self/code questions.

    With no docs tool (or a disabled one) the verb is never offered and refuses."""
    if docs is None or not docs.settings.enabled:
        return ToolVerb(verb="READ_DOC", usage="READ_DOC: <relative path>", when="", kind="read_doc",
                        handler=lambda _path: "error: the docs tool is disabled (tools.docs.enabled: false)",
                        offered=lambda _focus: False)
    readable = ", ".join(docs.readable())
    return ToolVerb(
        verb="READ_DOC",
        handler=lambda path: docs.call("read_doc", {"path": path}),
        usage="READ_DOC: <relative path>",
        when=read_doc_when(readable),
        offered=about_self_or_code,
        kind="read_doc")


def list_docs_verb(docs: DocsTool | None) -> ToolVerb:
    """`LIST_DOCS: <relative directory>` (empty or "." lists every root): the files the model
    may read, so READ_DOC is not guessed. Offered with READ_DOC, for self/code questions."""
    usage = "LIST_DOCS: <relative directory, or . for all>"
    if docs is None or not docs.settings.enabled:
        return ToolVerb(verb="LIST_DOCS", usage=usage, when="", kind="read_doc",
                        handler=lambda _dir: "error: the docs tool is disabled (tools.docs.enabled: false)",
                        offered=lambda _focus: False)
    return ToolVerb(
        verb="LIST_DOCS",
        handler=lambda subdir: docs.call("list_docs", {"subdir": "" if subdir.strip() in ("", ".") else subdir}),
        usage=usage,
        when=LIST_DOCS_WHEN,
        offered=about_self_or_code,
        kind="read_doc")


def docs_verbs(docs: DocsTool | None) -> list[ToolVerb]:
    """Both docs verbs, for the loop's ToolProtocol."""
    return [read_doc_verb(docs), list_docs_verb(docs)]
