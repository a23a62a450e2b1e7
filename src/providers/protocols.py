"""The four outside capabilities as Protocols, and the values they exchange.

    Embedder        texts -> (n, 768) float32, L2-normalised        (plan §2.1)
    Reranker        query, passages -> one score per passage        (plan §2.6)
    LanguageModel   System 1 / System 2 / isolated meta calls       (plan §2.8, §2.11, §3.6)

Implementations live one per module (embed_gemini, embed_wordllama, rerank_flashrank,
rerank_skipped, llm + llm_gemini / llm_anthropic / llm_openai_compat, llm_reflex).
Callers depend on these Protocols only; tests swap implementations at this seam.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar, runtime_checkable

import numpy as np
from pydantic import BaseModel

from src.providers.caller import Caller

TaskType = Literal["RETRIEVAL_DOCUMENT", "RETRIEVAL_QUERY", "SEMANTIC_SIMILARITY", "CLUSTERING"]
TASK_TYPES: tuple[TaskType, ...] = (
    "RETRIEVAL_DOCUMENT", "RETRIEVAL_QUERY", "SEMANTIC_SIMILARITY", "CLUSTERING",
)

Role = Literal["user", "assistant"]
M = TypeVar("M", bound=BaseModel)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors of `dimensions` floats.

    `model_name` tags every stored row (`memories.embed_model`): vectors of
    different models are never compared (plan §4.9).
    """

    model_name: str
    dimensions: int

    async def embed(
        self,
        texts: Sequence[str],
        task_type: TaskType,
        titles: Sequence[str | None] | None = None,
    ) -> np.ndarray:
        """Return an (n, dimensions) float32 array, each row L2-normalised, in input order."""
        ...


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, passage) pairs with a cross-encoder.

    When `skipped` is true no model is loaded: `rerank` raises ProviderSkipped and
    callers keep their weighted score (`skip_reason` says why, for the start-up report).
    """

    name: str
    skipped: bool
    skip_reason: str | None

    async def rerank(self, query: str, passages: Sequence[str]) -> list[float]:
        """One score in [0, 1] per passage, in the order given (not sorted)."""
        ...


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str
    # The input being answered: a request over the model's window loses only the messages
    # before the first pinned one, never it or what follows (src/providers/context_window.py).
    # Not part of equality: a pinned message says the same as an unpinned one.
    pinned: bool = field(default=False, compare=False)
    # What the mind read beside this message when it answered it (the turn's memories and
    # state, src/loop/turn_context.py), sent ahead of `content` in the same message: after
    # the conversation, so a server's prompt cache keeps everything before it (issue 38).
    # `content` stays the words said: what checks of the reply compare with.
    context: str = field(default="", compare=False)

    @property
    def text(self) -> str:
        """What the model is sent for this message: the context, then the words."""
        return f"{self.context}\n\n{self.content}" if self.context else self.content


@dataclass(frozen=True)
class TokenLogprob:
    token: str
    logprob: float


#: The finish reasons of a reply stopped by its output cap, lower-cased.
CUT_AT_CAP = frozenset({"length", "max_tokens"})


@dataclass(frozen=True)
class LLMResult:
    """One completed generation."""

    text: str
    model: str
    provider: str
    tokens_in: int
    tokens_out: int
    latency_ms: float
    # Chosen-token log probabilities when the model returns them (plan §2.11), else None.
    logprobs: tuple[TokenLogprob, ...] | None = None
    finish_reason: str | None = None

    @property
    def cut(self) -> bool:
        """The reply stopped at its output cap (OpenAI-compatible "length", Anthropic
        "max_tokens", Gemini "MAX_TOKENS")."""
        return (self.finish_reason or "").lower() in CUT_AT_CAP

    @property
    def mean_logprob(self) -> float | None:
        """Average log probability per generated token; None without logprobs."""
        if not self.logprobs:
            return None
        return sum(t.logprob for t in self.logprobs) / len(self.logprobs)


@dataclass(frozen=True)
class Structured(Generic[M]):
    """A validated structured answer and the generation(s) behind it."""

    value: M
    result: LLMResult
    repaired: bool


@runtime_checkable
class LanguageModel(Protocol):
    """A chat model behind one resilient interface.

    `configured` is False in reflex mode: every method then raises ProviderSkipped
    whose message says plainly that no language model is configured.
    """

    provider: str
    model: str
    configured: bool

    async def generate(
        self,
        messages: Sequence[ChatMessage],
        *,
        purpose: str,
        system: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        logprobs: bool | None = None,
        caller: Caller = ...,
    ) -> LLMResult:
        """One completion of the conversation in `messages` (oldest first); `caller`: whose
        call it is (src/providers/caller.py; default: internal, nobody's budget)."""
        ...

    async def generate_structured(
        self,
        messages: Sequence[ChatMessage],
        schema: type[M],
        *,
        purpose: str,
        system: str | None = None,
        max_tokens: int | None = None,
        caller: Caller = ...,
    ) -> Structured[M]:
        """JSON validated by `schema`; one repair attempt, then MalformedOutput."""
        ...

    async def meta_call(self, question: str, *, purpose: str, max_tokens: int | None = None,
                        caller: Caller = ...) -> LLMResult:
        """Isolated meta-context call: the question alone, no history, no identity."""
        ...

    async def meta_call_structured(
        self, question: str, schema: type[M], *, purpose: str, max_tokens: int | None = None,
        caller: Caller = ...,
    ) -> Structured[M]:
        """Isolated meta-context call answered as JSON validated by `schema`."""
        ...
