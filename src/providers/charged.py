"""A model whose every call is one caller's (src/providers/caller.py).

Consolidation's model and the guardian's /skill drafts: each method passes the caller on
explicitly (a call may still name another), never through a context variable or an
attribute proxy.
"""

from __future__ import annotations

from collections.abc import Sequence

from src.providers.caller import Caller
from src.providers.protocols import ChatMessage, LanguageModel, LLMResult, M, Structured


class ChargedModel:
    """`model`, every call of which is `caller`'s (a call may still say another caller)."""

    def __init__(self, model: LanguageModel, caller: Caller):
        self.inner = model
        self.caller = caller

    @property
    def provider(self) -> str:
        return self.inner.provider

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def configured(self) -> bool:
        return self.inner.configured

    @property
    def window(self) -> object:
        """The model's context window (src/providers/context_window.py), None when it states none:
        a caller sizing its questions (most_that_fit) and its replies reads it through here."""
        return getattr(self.inner, "window", None)

    def room(self, **call: object) -> int | None:
        """`ResilientLanguageModel.room` of the model (context_window.room_of); None without one."""
        room = getattr(self.inner, "room", None)
        return room(**call) if callable(room) else None

    async def generate(self, messages: Sequence[ChatMessage], *, purpose: str, system: str | None = None,
                       max_tokens: int | None = None, temperature: float | None = None,
                       logprobs: bool | None = None, caller: Caller | None = None) -> LLMResult:
        return await self.inner.generate(messages, purpose=purpose, system=system, max_tokens=max_tokens,
                                         temperature=temperature, logprobs=logprobs, caller=caller or self.caller)

    async def generate_structured(self, messages: Sequence[ChatMessage], schema: type[M], *, purpose: str,
                                  system: str | None = None, max_tokens: int | None = None,
                                  caller: Caller | None = None) -> Structured[M]:
        return await self.inner.generate_structured(messages, schema, purpose=purpose, system=system,
                                                    max_tokens=max_tokens, caller=caller or self.caller)

    async def meta_call(self, question: str, *, purpose: str, max_tokens: int | None = None,
                        caller: Caller | None = None) -> LLMResult:
        return await self.inner.meta_call(question, purpose=purpose, max_tokens=max_tokens,
                                          caller=caller or self.caller)

    async def meta_call_structured(self, question: str, schema: type[M], *, purpose: str,
                                   max_tokens: int | None = None, caller: Caller | None = None) -> Structured[M]:
        return await self.inner.meta_call_structured(question, schema, purpose=purpose, max_tokens=max_tokens,
                                                     caller=caller or self.caller)
