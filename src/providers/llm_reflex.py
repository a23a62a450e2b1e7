"""Reflex mode: the language-model role when no model is configured.

Every method raises ProviderSkipped whose message starts with NO_LANGUAGE_MODEL, so the
loop can tell the user plainly and still run everything that needs no model. Nothing is
called, so nothing goes to the ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

from src.errors import ProviderSkipped
from src.providers.caller import Caller
from src.providers.protocols import ChatMessage, LLMResult, M, Structured

NO_LANGUAGE_MODEL = "no language model is configured"


class ReflexLanguageModel:
    """LanguageModel stand-in: `configured` is False and every call raises ProviderSkipped."""

    provider = "reflex"
    model = "none"
    configured = False

    def __init__(self, reason: str):
        self.reason = reason

    @property
    def message(self) -> str:
        return f"{NO_LANGUAGE_MODEL} ({self.reason})"

    def _skip(self, purpose: str) -> NoReturn:
        raise ProviderSkipped(f"{self.message}; skipped {purpose}", provider=self.provider)

    async def generate(self, messages: Sequence[ChatMessage], *, purpose: str, system: str | None = None,
                       max_tokens: int | None = None, temperature: float | None = None,
                       logprobs: bool | None = None, caller: Caller | None = None) -> LLMResult:
        self._skip(purpose)

    async def generate_structured(self, messages: Sequence[ChatMessage], schema: type[M], *,
                                  purpose: str, system: str | None = None,
                                  max_tokens: int | None = None, caller: Caller | None = None) -> Structured[M]:
        self._skip(purpose)

    async def meta_call(self, question: str, *, purpose: str, max_tokens: int | None = None,
                        caller: Caller | None = None) -> LLMResult:
        self._skip(purpose)

    async def meta_call_structured(self, question: str, schema: type[M], *, purpose: str,
                                   max_tokens: int | None = None, caller: Caller | None = None) -> Structured[M]:
        self._skip(purpose)

    async def aclose(self) -> None:
        """Nothing to close."""
