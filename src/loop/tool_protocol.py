"""Tool calls written as protocol lines in a model's reply (plan §4.10, and later verbs).

A model calls a tool by writing a line `VERB: argument` (`READ_DOC: notes.md`). This
module is the one place that knows the protocol: a registry of verbs → handlers, the
detection of protocol lines anywhere in a reply, and the rounds of one answer:

    answer (with the tool instruction, when a verb is offered for this focus)
    ├─ no protocol line → that reply is the answer
    ├─ a protocol line, budget left, verb offered, tool succeeds → its result goes
    │  back to the model and it answers again
    └─ budget spent, verb not offered, or the tool refuses (an ``error:`` result)
       → the model is asked once more, WITHOUT tools, to answer the user; the
         refused call and its error are not in that request
           ├─ a plain reply → the answer
           └─ another protocol line → no answer: the caller gives its failure reply

A reply that contains a protocol line is never an answer, wherever the line sits:
small local models wrap it in prose or backticks. Detection ignores case and knows
every registered verb, offered or not, so a verb the model was not offered (or
remembers from elsewhere) cannot reach the user either.

Verbs are offered per focus (`ToolVerb.offered`): a tool instruction in every prompt
invites a small model to call the tool on "Hello, my name is Dana" — the bug this
module exists for. Adding a verb is one `register` call.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from src.loop.prompts import NO_TOOLS_NOTE, tool_result, tools_section
from src.providers.protocols import ChatMessage
from src.text import size
from src.tools.verbs import ToolVerb

log = logging.getLogger(__name__)

T = TypeVar("T")
Answer = Callable[[list[ChatMessage], str], Awaitable[T]]

_ARG_TRIM = "`'\"*_ \t"


@dataclass(frozen=True)
class ToolCall:
    verb: str
    argument: str

    @property
    def line(self) -> str:
        return f"{self.verb}: {self.argument}"


@dataclass(frozen=True)
class ToolResult:
    call: ToolCall
    text: str
    refused: bool

    def message(self) -> ChatMessage:
        """The result as the model reads it."""
        return ChatMessage("user", tool_result(self.call.verb, self.call.argument, self.text))

    def action(self) -> dict:
        """The thought_log `actions` entry for this call."""
        entry = {"kind": "tool", "verb": self.call.verb, "argument": self.call.argument,
                 "refused": self.refused}
        if self.refused:
            entry["error"] = self.text[:300]
        return entry


@dataclass
class ToolRounds(Generic[T]):
    """What the rounds of one answer came to."""

    answer: T | None                 # None: every reply carried a protocol line (failure)
    ended: str                       # answered | answered_without_tools | failed
    results: list[ToolResult] = field(default_factory=list)
    why: str = ""                    # why tools were withdrawn (budget, refusal), if they were


class ToolProtocol:
    """The registry of verbs and the round logic around one answer."""

    def __init__(self, max_calls: int):
        if max_calls < 0:
            raise ValueError(f"max_calls must be >= 0, got {max_calls}")
        self.max_calls = max_calls
        self._verbs: dict[str, ToolVerb] = {}
        self._pattern: re.Pattern[str] | None = None

    def register(self, verb: ToolVerb) -> None:
        """Add a verb (its name must be new)."""
        if verb.verb in self._verbs:
            raise ValueError(f"protocol verb {verb.verb} is registered twice")
        self._verbs[verb.verb] = verb
        names = "|".join(sorted(map(re.escape, self._verbs), key=len, reverse=True))
        # the verb as a word of its own, then ':' — anywhere on a line; the argument is the rest
        self._pattern = re.compile(rf"(?<![A-Za-z0-9_])({names})[ \t]*:[ \t]*(.*)$",
                                   re.IGNORECASE | re.MULTILINE)

    @property
    def verbs(self) -> list[str]:
        return list(self._verbs)

    def kind(self, verb: str) -> str:
        """The action kind of a registered verb; an unknown verb is an external effect."""
        found = self._verbs.get(verb)
        return found.kind if found is not None else "external_effect"

    def offered(self, focus: str) -> list[ToolVerb]:
        """The verbs offered for this focus (none when the budget is 0)."""
        if not self.max_calls:
            return []
        return [v for v in self._verbs.values() if v.offered(focus)]

    def instruction(self, focus: str) -> str:
        """The tool lines of the system prompt for this focus; "" when nothing is offered."""
        offered = self.offered(focus)
        if not offered:
            return ""
        return tools_section(offered)

    def find_calls(self, text: str) -> list[ToolCall]:
        """Every protocol line in `text`, in order (any registered verb, any case)."""
        if self._pattern is None or not text:
            return []
        calls = []
        for m in self._pattern.finditer(text):
            argument = m.group(2).strip(_ARG_TRIM).rstrip(".,;").strip(_ARG_TRIM)
            calls.append(ToolCall(m.group(1).upper(), argument))
        return calls

    def contains_call(self, text: str) -> bool:
        """Whether `text` holds a protocol line (and so must not be delivered)."""
        return bool(self.find_calls(text))

    async def call(self, call: ToolCall, offered: Sequence[str] | None = None,
                   refusal: str | None = None) -> ToolResult:
        """Run one call; a verb not offered this time, or one the action check refused
        (`refusal`: its reason), is refused without running."""
        verb = self._verbs[call.verb]
        if offered is not None and call.verb not in offered:
            return ToolResult(call, f"error: {call.verb} is not available for this message", True)
        if refusal is not None:
            return ToolResult(call, f"error: the action check refused {call.verb}: {refusal}", True)
        text = verb.handler(call.argument)
        if inspect.isawaitable(text):
            text = await text
        return ToolResult(call, text, verb.refused(text))

    async def rounds(self, answer: Answer[T], text_of: Callable[[T], str], messages: Sequence[ChatMessage],
                     *, system: str, focus: str,
                     permit: Callable[[ToolVerb, T], str | None] | None = None) -> ToolRounds[T]:
        """Answer `messages`, running tool calls within the budget (see the module doc).

        `answer(messages, system)` asks the model; `text_of` gives the reply's text.
        `system` is the prompt without tool lines: they are added here when offered.
        `permit(verb, reply)` is the action check BEFORE a call runs: None allows it,
        a reason refuses it (plan §3.4: acting checks source tags; a verb of external
        effect must not run first and be judged after).
        """
        offered = self.offered(focus)
        names = [v.verb for v in offered]
        tools = self.instruction(focus)
        conversation = list(messages)
        results: list[ToolResult] = []
        why = ""
        while True:
            reply = await answer(conversation, _join(system, tools))
            calls = self.find_calls(text_of(reply))
            if not calls:
                return ToolRounds(reply, "answered", results)
            call = calls[0]   # one call per reply; the rest of that reply is not kept
            if len(results) >= self.max_calls:
                why = f"the tool budget ({self.max_calls}) is spent"
                break
            refusal = permit(self._verbs[call.verb], reply) if permit is not None else None
            result = await self.call(call, names, refusal)
            results.append(result)
            if result.refused:
                why = f"{call.verb} refused: {result.text[:200]}"
                break
            conversation += [ChatMessage("assistant", call.line), result.message()]
        # a refusal's text may quote the model's argument or a memory (a goal the mind declared):
        # the log line names the verb and a size, the words go to DEBUG (issue 39)
        last = results[-1] if results else None
        log.info("asking once more without tools (%s)", f"{last.call.verb} refused, {size(last.text)}"
                 if last is not None and last.refused else why)
        log.debug("without tools: %s", why)
        # the refused call and its error stay out: the model answers the user, not the refusal
        kept = [m for r in results if not r.refused for m in (ChatMessage("assistant", r.call.line),
                                                              r.message())]
        reply = await answer([*messages, *kept], _join(system, NO_TOOLS_NOTE))
        if self.contains_call(text_of(reply)):
            log.warning("the model answered with a protocol line even without tools; failure reply")
            return ToolRounds(None, "failed", results, why)
        return ToolRounds(reply, "answered_without_tools", results, why)


def _join(*parts: str) -> str:
    return "\n\n".join(p for p in parts if p)
