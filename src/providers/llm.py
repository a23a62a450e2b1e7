"""One resilient LanguageModel over any chat backend (Gemini, Anthropic, OpenAI-compatible).

A backend does exactly one HTTP call and maps its SDK's errors (llm_gemini, llm_anthropic,
llm_openai_compat). This wrapper adds what is common: the retry policy and circuit breaker,
one ledger row per attempt (failed ones too), structured output with one repair round
(none for a reply its output cap cut: ReplyCut) (the answer schema sent where the endpoint takes one; a model that refuses it is asked in
plain JSON mode from then on), isolated meta-context calls, and logprobs that switch
themselves off for a model that refuses them (Gemini answers HTTP 400 "Logprobs is not enabled for models/..." for some
models; see notes.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from src.errors import ContextOverflow, MalformedOutput, ProviderError, ProviderRejected, ReplyCut
from src.providers.caller import INTERNAL, Caller
from src.providers.context_window import ContextWindow, count_request, fit
from src.providers.costs import CallUsage, Ledger, status_of
from src.providers.prompts import EMPTY_REPLY, META_SYSTEM, repair_prompt, schema_instruction
from src.providers.protocols import ChatMessage, LLMResult, M, Structured
from src.providers.redact import Redactor
from src.providers.resilience import Resilience
from src.providers.settings import LLMSettings
from src.providers.structured import (
    ResponseSchema,
    parse_structured,
    response_schema,
    schema_refused,
)
from src.tokens import OFF_LOOP_CHARS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LLMRequest:
    """Everything a backend needs for one completion."""

    messages: tuple[ChatMessage, ...]
    system: str | None
    max_tokens: int
    temperature: float | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    json_mode: bool = False
    # The answer schema for endpoints that take one (src/providers/structured.py); None: JSON mode only.
    response_schema: ResponseSchema | None = None


class LLMBackend(Protocol):
    """One provider's single HTTP call. Raises only ProviderError subclasses."""

    provider: str
    model: str

    async def complete(self, request: LLMRequest) -> LLMResult: ...

    async def aclose(self) -> None: ...


class ResilientLanguageModel:
    """LanguageModel: a backend behind retries, breaker, ledger and structured output."""

    configured = True

    def __init__(self, backend: LLMBackend, *, resilience: Resilience, ledger: Ledger,
                 redactor: Redactor | None = None, settings: LLMSettings | None = None,
                 window: ContextWindow | None = None):
        """`settings`: `providers.llm`, of which the model reads how it asks: max output
        tokens, temperature and logprobs (their defaults without it)."""
        settings = settings or LLMSettings()
        self.backend = backend
        self.provider = backend.provider
        self.model = backend.model
        self._resilience = resilience
        self._ledger = ledger
        self._redact = redactor or Redactor()
        self.max_output_tokens = self._max_output_asked = settings.max_output_tokens
        self.window = ContextWindow.known(backend.provider)
        self.set_window(window or self.window)
        self.temperature = settings.temperature
        self.request_logprobs = settings.request_logprobs
        self.top_logprobs = settings.top_logprobs
        self.logprobs_supported: bool | None = None  # None: not yet known
        self.schema_supported: bool | None = None    # the endpoint takes a response schema

    async def generate(self, messages: Sequence[ChatMessage], *, purpose: str,
                       system: str | None = None, max_tokens: int | None = None,
                       temperature: float | None = None, logprobs: bool | None = None,
                       caller: Caller = INTERNAL) -> LLMResult:
        """One completion of `messages` (oldest first) under `system`, as `caller`'s call
        (its place at the endpoint, whose budget it counts against)."""
        want = self.request_logprobs if logprobs is None else logprobs
        request = self._request(messages, system, max_tokens, temperature, logprobs=want)
        return await self._complete(request, purpose, caller)

    async def generate_structured(self, messages: Sequence[ChatMessage], schema: type[M], *,
                                  purpose: str, system: str | None = None,
                                  max_tokens: int | None = None, caller: Caller = INTERNAL) -> Structured[M]:
        """JSON validated by `schema`; on a bad reply one repair round, then MalformedOutput.
        A reply cut by its output cap is not repaired (ReplyCut: the caller asks for less)."""
        instruction = schema_instruction(schema)
        full_system = f"{system}\n\n{instruction}" if system else instruction
        request = replace(self._request(messages, full_system, max_tokens, None, logprobs=False),
                          json_mode=True, response_schema=response_schema(schema))
        first = await self._complete(request, purpose, caller)
        try:
            return Structured(parse_structured(first.text, schema), first, repaired=False)
        except MalformedOutput as problem:
            if first.cut:
                # the JSON did not close before the cap: a repair at the same cap is cut again
                raise ReplyCut(f"{self.model} {purpose}: the {schema.__name__} reply stopped at its cap of "
                               f"{request.max_tokens} tokens ({problem})", provider=self.provider,
                               cap=request.max_tokens) from None
            log.info("%s %s: unusable structured reply (%s); asking once for a repair",
                     self.model, purpose, problem)
            follow_up = (ChatMessage("assistant", first.text.strip() or EMPTY_REPLY),
                         ChatMessage("user", repair_prompt(problem)))
            second = await self._complete(replace(request, messages=request.messages + follow_up),
                                          f"{purpose}:repair", caller)
            try:
                return Structured(parse_structured(second.text, schema), second, repaired=True)
            except MalformedOutput as again:
                raise MalformedOutput(f"{self.model} {purpose}: still not a valid {schema.__name__} "
                                      f"after one repair ({again})", provider=self.provider) from again

    async def meta_call(self, question: str, *, purpose: str, max_tokens: int | None = None,
                        caller: Caller = INTERNAL) -> LLMResult:
        """Isolated meta-context call (plan §2.8, §2.11): the question alone.

        There is deliberately no parameter for history, system prompt or identity.
        """
        return await self.generate(self._meta_messages(question), purpose=purpose,
                                   system=META_SYSTEM, max_tokens=max_tokens, caller=caller)

    async def meta_call_structured(self, question: str, schema: type[M], *, purpose: str,
                                   max_tokens: int | None = None, caller: Caller = INTERNAL) -> Structured[M]:
        """Isolated meta-context call answered as JSON validated by `schema`."""
        return await self.generate_structured(self._meta_messages(question), schema,
                                              purpose=purpose, system=META_SYSTEM,
                                              max_tokens=max_tokens, caller=caller)

    async def aclose(self) -> None:
        await self.backend.aclose()

    @property
    def timeout_s(self) -> float:
        """Seconds one attempt may take (its provider kind's `providers.llm.timeout_s`)."""
        return self._resilience.policy.timeout_s

    @staticmethod
    def _meta_messages(question: str) -> tuple[ChatMessage, ...]:
        if not isinstance(question, str):
            raise TypeError("a meta call takes one question string, never a conversation")
        if not question.strip():
            raise ValueError("a meta call needs a non-empty question")
        return (ChatMessage("user", question),)

    def _request(self, messages: Sequence[ChatMessage], system: str | None, max_tokens: int | None,
                 temperature: float | None, *, logprobs: bool) -> LLMRequest:
        messages = tuple(messages)
        if not messages:
            raise ValueError("generate needs at least one message")
        if any(not isinstance(m, ChatMessage) or m.role not in ("user", "assistant") for m in messages):
            raise ValueError("messages must be ChatMessage objects with role 'user' or 'assistant'")
        return LLMRequest(
            messages=messages, system=system,
            max_tokens=max_tokens or self.max_output_tokens,
            temperature=self.temperature if temperature is None else temperature,
            logprobs=logprobs and self.logprobs_supported is not False,
            top_logprobs=self.top_logprobs,
        )

    async def _complete(self, request: LLMRequest, purpose: str, caller: Caller) -> LLMResult:
        if self.schema_supported is False and request.response_schema is not None:
            request = replace(request, response_schema=None)
        try:
            result = await self._call(request, purpose, caller)
        except ProviderRejected as err:
            if request.response_schema is not None and schema_refused(err):
                # once per model: JSON mode without the schema from now on (structured.py)
                self.schema_supported = False
                log.info("%s refuses the response schema (%s); JSON mode without it from now on",
                         self.model, err)
                return await self._complete(replace(request, response_schema=None), purpose, caller)
            if not (request.logprobs and "logprob" in str(err).lower()):
                raise
            self.logprobs_supported = False
            log.info("%s does not return logprobs (%s); asking without them from now on", self.model, err)
            result = await self._call(replace(request, logprobs=False), purpose, caller)
        if request.logprobs and result.logprobs is not None:
            self.logprobs_supported = True
        return result

    def set_window(self, window: ContextWindow) -> None:
        """The model's context window (src/providers/context_window.py); the reply's max tokens
        are capped to a share of it."""
        self.window = window
        self.max_output_tokens = window.reply_cap(self._max_output_asked)
        if self.max_output_tokens < self._max_output_asked:
            log.info("%s: max_output_tokens %d capped to %d, a quarter of its context window of %s",
                     self.model, self._max_output_asked, self.max_output_tokens, window.describe())

    def room(self, *, system: str | None = None, schema: type | None = None, meta: bool = False,
             max_tokens: int | None = None) -> int:
        """Our count the messages of a call may take and still fit the window, for a caller
        that cuts its input to it: the call's system prompt (META_SYSTEM for a meta call, the
        schema instruction for a structured one) and its reply left out."""
        full = META_SYSTEM if meta else system
        if schema is not None:
            instruction = schema_instruction(schema)
            full = f"{full}\n\n{instruction}" if full else instruction
        limit = self.window.prompt_limit(max_tokens or self.max_output_tokens)
        return max(0, limit - count_request(full, ()))

    async def _call(self, request: LLMRequest, purpose: str, caller: Caller) -> LLMResult:
        """The last line before a backend: the request fitted to the window (`fit`: oldest
        history out, or ContextOverflow, never sent), then sent. An endpoint that answers that
        it was too long teaches the window (its count, its size) and gets it once more, refitted."""
        request, counted = await self._fit(request, purpose)
        try:
            result = await self._send(request, purpose, caller)
        except ProviderRejected as err:
            if isinstance(err, ContextOverflow) or not self.window.learn_from(str(err), counted):
                raise
            log.warning("%s %s: the endpoint says the request exceeded its context (%s); now %s, "
                        "asking once more", self.model, purpose, err, self.window.describe())
            request, counted = await self._fit(request, purpose)
            result = await self._send(request, purpose, caller)
        self.window.observe(counted, result.tokens_in)
        return result

    async def _fit(self, request: LLMRequest, purpose: str) -> tuple[LLMRequest, int]:
        what = f"{self.model} {purpose}"
        if request.max_tokens > (cap := self.window.reply_cap(request.max_tokens)):
            request = replace(request, max_tokens=cap)   # a reply takes at most a quarter of the window
        args = (self.window, request.system, request.messages, request.max_tokens)
        size = len(request.system or "") + sum(len(m.text) for m in request.messages)
        try:   # counting a pasted megabyte would stall the event loop: in a thread
            fitted = (await asyncio.to_thread(fit, *args, what=what) if size > OFF_LOOP_CHARS
                      else fit(*args, what=what))
        except ContextOverflow as err:
            log.warning("%s", err)
            raise
        if fitted.dropped:
            log.info("%s: the %d oldest messages left out to fit the context window of %s",
                     what, fitted.dropped, self.window.describe())
            request = replace(request, messages=fitted.messages)
        return request, fitted.counted

    async def _send(self, request: LLMRequest, purpose: str, caller: Caller) -> LLMResult:
        measured: list[float] = []

        async def attempt() -> LLMResult:
            try:
                return await self.backend.complete(request)
            except ProviderError as err:
                self._redact.error(err)
                raise

        async def on_success(result: LLMResult, latency_ms: float) -> None:
            measured.append(latency_ms)
            await self._ledger.record(provider=self.provider, model=self.model, purpose=purpose, ok=True,
                                      usage=CallUsage(result.tokens_in, result.tokens_out, latency_ms),
                                      caller=caller.charge)

        async def on_failure(err: ProviderError, latency_ms: float) -> None:
            await self._ledger.record(provider=self.provider, model=self.model, purpose=purpose, ok=False,
                                      usage=CallUsage(latency_ms=latency_ms), error=f"{type(err).__name__}: {err}",
                                      status=status_of(err), caller=caller.charge)

        result = await self._resilience.call(attempt, what=purpose, on_success=on_success,
                                             on_failure=on_failure, priority=caller.priority)
        return replace(result, latency_ms=measured[-1] if measured else result.latency_ms)
