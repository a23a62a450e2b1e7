"""Building the providers from settings: `build_providers(...) -> Providers`.

Construction does no network I/O and loads no model (WordLlama and FlashRank load on first
use in a worker thread, or in `Providers.warm_up()`). One circuit breaker per provider is
shared by every role that provider serves (Gemini serves embeddings, System 1 and meta
calls). `meta` is the model for isolated meta-context calls: System 1 when configured,
else System 2, else reflex.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import asyncpg
import httpx2

from src.providers.costs import CostLedger, MemoryLedger
from src.providers.embed_wordllama import WordLlamaEmbedder
from src.providers.llm import LLMBackend, ResilientLanguageModel
from src.providers.llm_reflex import ReflexLanguageModel
from src.providers.protocols import Embedder, LanguageModel, Reranker
from src.providers.redact import Redactor, url_secrets
from src.providers.rerank_flashrank import FlashRankReranker
from src.providers.rerank_skipped import SkippedReranker
from src.providers.resilience import CircuitBreaker, Clock, Resilience, RetryPolicy, Sleep
from src.providers.selection import Choice, choose_all
from src.providers.settings import ProvidersSettings, Secrets

log = logging.getLogger(__name__)

ANTHROPIC_BASE_URL = "https://api.anthropic.com"


@dataclass
class Providers:
    """Everything the mind calls outside itself, plus the ledger of what it cost."""

    embedder: Embedder
    reranker: Reranker
    system1: LanguageModel
    system2: LanguageModel
    meta: LanguageModel
    ledger: CostLedger | MemoryLedger
    choices: list[Choice]
    breakers: dict[str, CircuitBreaker] = field(default_factory=dict)
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list, repr=False)

    @property
    def report(self) -> list[str]:
        """The start-up lines (same as describe_providers)."""
        return [c.line for c in self.choices]

    async def warm_up(self) -> None:
        """Load the local models (WordLlama, FlashRank) in worker threads now."""
        for part in (self.embedder, self.reranker):
            warm = getattr(part, "warm_up", None)
            if warm is not None:
                await warm()

    async def aclose(self) -> None:
        """Write queued ledger rows and close HTTP clients. Safe to call twice."""
        if isinstance(self.ledger, CostLedger) and self.ledger.pending:
            await self.ledger.flush()
        closers, self._closers = self._closers, []
        for close in closers:
            try:
                await close()
            except Exception as exc:  # noqa: BLE001 - shutdown goes on regardless
                log.warning("closing a provider client failed: %s: %s", type(exc).__name__, exc)


@dataclass
class _Context:
    settings: ProvidersSettings
    secrets: Secrets
    ledger: CostLedger | MemoryLedger
    redactor: Redactor
    transport: httpx2.AsyncBaseTransport | None
    sleep: Sleep
    rng: random.Random
    clock: Clock
    breakers: dict[str, CircuitBreaker] = field(default_factory=dict)
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    clients: dict[str, object] = field(default_factory=dict)

    def resilience(self, provider: str) -> Resilience:
        r = self.settings.resilience
        breaker = self.breakers.get(provider)
        if breaker is None:
            breaker = CircuitBreaker(provider, r.breaker_failures, r.breaker_reset_s, clock=self.clock)
            self.breakers[provider] = breaker
        return Resilience(RetryPolicy.from_settings(r), breaker, sleep=self.sleep, rng=self.rng,
                          clock=self.clock)

    def http_client(self, **kwargs: object) -> httpx2.AsyncClient:
        timeout = httpx2.Timeout(self.settings.resilience.timeout_s)
        client = httpx2.AsyncClient(timeout=timeout, transport=self.transport, **kwargs)
        self.closers.append(client.aclose)
        return client

    def genai_client(self):
        if "gemini" not in self.clients:
            from google import genai
            from google.genai import types as genai_types

            assert self.secrets.gemini_api_key is not None
            # Our own httpx2 client: google-genai would otherwise pick aiohttp when installed,
            # whose errors are not in our map.
            options = genai_types.HttpOptions(
                httpx_async_client=self.http_client(),
                timeout=int(self.settings.resilience.timeout_s * 1000))
            client = genai.Client(api_key=self.secrets.gemini_api_key.get_secret_value(), vertexai=False,
                                  http_options=options)

            async def close_sync_side() -> None:  # the SDK also builds a sync client of its own
                client.close()

            self.closers.append(close_sync_side)
            self.clients["gemini"] = client
        return self.clients["gemini"]

    def backend(self, choice: Choice) -> LLMBackend:
        if choice.kind == "gemini":
            from src.providers.llm_gemini import GeminiBackend

            return GeminiBackend(self.genai_client(), choice.model or "")
        if choice.kind == "anthropic":
            import anthropic

            from src.providers.llm_anthropic import AnthropicBackend

            assert self.secrets.anthropic_api_key is not None
            client = anthropic.AsyncAnthropic(
                api_key=self.secrets.anthropic_api_key.get_secret_value(), base_url=ANTHROPIC_BASE_URL,
                max_retries=0, timeout=self.settings.resilience.timeout_s,
                http_client=self.http_client() if self.transport is not None else None)
            self.closers.append(client.close)
            return AnthropicBackend(client, choice.model or "", owns_client=False)
        if choice.kind == "openai_compat":
            from src.providers.llm_openai_compat import OpenAICompatBackend

            base_url = self.settings.llm.base_url or ""
            http = self.clients.get("openai_compat")
            if http is None:
                http = self.clients["openai_compat"] = self.http_client(base_url=base_url)
            return OpenAICompatBackend(http, choice.model or "", api_key=self.secrets.openai_api_key,
                                       owns_client=False)
        raise ValueError(f"no backend for provider kind {choice.kind!r}")

    def language_model(self, choice: Choice) -> LanguageModel:
        if choice.kind == "reflex":
            return ReflexLanguageModel(choice.reason)
        llm = self.settings.llm
        backend = self.backend(choice)
        return ResilientLanguageModel(
            backend, resilience=self.resilience(backend.provider), ledger=self.ledger,
            redactor=self.redactor, max_output_tokens=llm.max_output_tokens,
            temperature=llm.temperature, request_logprobs=llm.request_logprobs,
            top_logprobs=llm.top_logprobs)

    def embedder(self, choice: Choice) -> Embedder:
        emb = self.settings.embeddings
        if choice.kind == "gemini":
            from src.providers.embed_gemini import GeminiEmbedder

            return GeminiEmbedder(self.genai_client(), resilience=self.resilience("gemini"),
                                  ledger=self.ledger, model=emb.gemini_model, dimensions=emb.dimensions,
                                  batch_size=emb.batch_size, redactor=self.redactor, clock=self.clock,
                                  max_input_tokens=emb.gemini_max_input_tokens)
        return WordLlamaEmbedder(config=emb.wordllama_config, dim=emb.wordllama_dim,
                                 dimensions=emb.dimensions, max_tokens=emb.wordllama_max_tokens)

    def reranker(self, choice: Choice) -> Reranker:
        if choice.kind == "flashrank":
            rr = self.settings.rerank
            return FlashRankReranker(rr.cache_dir, rr.model, rr.max_length)
        return SkippedReranker(choice.reason)


def build_providers(
    settings: ProvidersSettings,
    secrets: Secrets,
    pool: asyncpg.Pool | None,
    session_id: str | None,
    *,
    http_transport: httpx2.AsyncBaseTransport | None = None,
    sleep: Sleep = asyncio.sleep,
    rng: random.Random | None = None,
    clock: Clock = time.monotonic,
) -> Providers:
    """Build every provider the settings and secrets allow; raise ConfigError for impossible ones.

    `pool` None keeps the ledger in memory (benchmarks, tests without a database).
    `http_transport`, `sleep`, `rng` and `clock` exist for tests: one fake transport
    serves every cloud client.
    """
    choices = choose_all(settings, secrets)
    ledger: CostLedger | MemoryLedger
    if pool is None:
        ledger = MemoryLedger(settings.prices, session_id=session_id)
    else:
        ledger = CostLedger(pool, session_id=session_id, prices=settings.prices,
                            max_pending=settings.ledger.max_pending,
                            write_timeout_s=settings.ledger.write_timeout_s)
    ctx = _Context(settings, secrets, ledger,
                   Redactor([secrets.gemini_api_key, secrets.anthropic_api_key, secrets.openai_api_key,
                             *url_secrets(settings.llm.base_url)]),
                   http_transport, sleep, rng if rng is not None else random.Random(), clock)
    by_role = {c.role: c for c in choices}
    system1 = ctx.language_model(by_role["system1"])
    system2 = ctx.language_model(by_role["system2"])
    meta = system1 if system1.configured else system2
    return Providers(
        embedder=ctx.embedder(by_role["embeddings"]), reranker=ctx.reranker(by_role["reranker"]),
        system1=system1, system2=system2, meta=meta, ledger=ledger, choices=choices,
        breakers=ctx.breakers, _closers=ctx.closers)
