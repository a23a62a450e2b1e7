"""A scripted LanguageModel at the provider seam, recording everything it is sent.

`ScriptedLLM` answers `generate` from a queue (strings, LLMResults, exceptions or
callables of the call), `generate_structured` from a queue of dicts / models /
exceptions, and isolated meta calls with `meta(question, schema)`. Every call is
recorded with its kind, purpose, messages, system prompt and schema, so tests can
assert what went out (e.g. that a meta call carried no history).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from src.errors import ProviderSkipped
from src.providers.caller import INTERNAL, Caller
from src.providers.protocols import ChatMessage, LLMResult, Structured, TokenLogprob


@dataclass
class Call:
    kind: str                                  # generate | generate_structured | meta_call_structured
    purpose: str
    messages: tuple[ChatMessage, ...] = ()
    system: str | None = None
    schema: type | None = None
    question: str | None = None
    max_tokens: int | None = None
    caller: Caller = INTERNAL                  # whose call it said it was (src/providers/caller.py)


def result(text: str, *, model: str = "scripted-1", tokens_in: int = 10, tokens_out: int = 5,
           logprobs: Sequence[float] | None = None) -> LLMResult:
    lp = None if logprobs is None else tuple(TokenLogprob(f"t{i}", v) for i, v in enumerate(logprobs))
    return LLMResult(text, model, "scripted", tokens_in, tokens_out, 1.0, lp)


@dataclass
class ScriptedLLM:
    """LanguageModel fake. Unscripted calls fail the test with what was asked."""

    model: str = "scripted-1"
    provider: str = "scripted"
    configured: bool = True
    replies: deque = field(default_factory=deque)          # for generate
    structured: deque = field(default_factory=deque)       # for generate_structured
    meta: Callable[[str, type], Any] | None = None         # for meta_call_structured
    calls: list[Call] = field(default_factory=list)

    def say(self, *answers: Any) -> ScriptedLLM:
        self.replies.extend(answers)
        return self

    def answer_structured(self, *answers: Any) -> ScriptedLLM:
        self.structured.extend(answers)
        return self

    def of(self, kind: str) -> list[Call]:
        return [c for c in self.calls if c.kind == kind]

    def _check_messages(self, messages: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
        messages = tuple(messages)
        assert messages, "generate needs at least one message"
        assert all(isinstance(m, ChatMessage) and m.role in ("user", "assistant") for m in messages)
        return messages

    def _skip(self, purpose: str) -> None:
        if not self.configured:
            raise ProviderSkipped(f"no language model is configured (scripted); skipped {purpose}",
                                  provider=self.provider)

    async def generate(self, messages, *, purpose, system=None, max_tokens=None, temperature=None,
                       logprobs=None, caller=INTERNAL) -> LLMResult:
        call = Call("generate", purpose, self._check_messages(messages), system, max_tokens=max_tokens,
                    caller=caller)
        self.calls.append(call)
        self._skip(purpose)
        assert self.replies, f"unscripted generate call ({purpose}): last message {call.messages[-1]}"
        answer = self.replies.popleft()
        if callable(answer) and not isinstance(answer, LLMResult):
            answer = answer(call)
        if isinstance(answer, BaseException):
            raise answer
        return answer if isinstance(answer, LLMResult) else result(answer, model=self.model)

    async def generate_structured(self, messages, schema, *, purpose, system=None, max_tokens=None,
                                  caller=INTERNAL):
        call = Call("generate_structured", purpose, self._check_messages(messages), system, schema,
                    max_tokens=max_tokens, caller=caller)
        self.calls.append(call)
        self._skip(purpose)
        assert self.structured, f"unscripted structured call ({purpose}, {schema.__name__})"
        answer = self.structured.popleft()
        if isinstance(answer, BaseException):
            raise answer
        value = answer if isinstance(answer, BaseModel) else schema(**answer)
        return Structured(value, result(value.model_dump_json(), model=self.model), repaired=False)

    async def meta_call(self, question, *, purpose, max_tokens=None, caller=INTERNAL):
        raise AssertionError("only structured meta calls are expected here")

    async def meta_call_structured(self, question, schema, *, purpose, max_tokens=None, caller=INTERNAL):
        assert isinstance(question, str), "a meta call takes one question string"
        self.calls.append(Call("meta_call_structured", purpose, (), None, schema, question, max_tokens, caller))
        self._skip(purpose)
        assert self.meta is not None, f"unscripted meta call ({purpose})"
        answer = self.meta(question, schema)
        if isinstance(answer, BaseException):
            raise answer
        value = answer if isinstance(answer, BaseModel) else schema(**answer)
        return Structured(value, result(value.model_dump_json(), model=self.model), repaired=False)


def fok(judgement: str, confidence: float) -> Callable[[str, type], dict]:
    """A meta script that always answers the feeling-of-knowing question this way."""
    def answer(question: str, schema: type) -> dict:
        assert "Do you know the answer" in question, question
        return {"judgement": judgement, "confidence": confidence}
    return answer
