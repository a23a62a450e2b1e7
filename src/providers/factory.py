"""Building the providers from settings: `build_providers(...) -> Providers`.

Construction does no network I/O and loads no model (WordLlama and FlashRank load on first
use in a worker thread, or in `Providers.warm_up()`). One circuit breaker per provider is
shared by every role that provider serves (Gemini serves embeddings, System 1 and meta
calls). `meta` is the model for isolated meta-context calls: System 1 when configured,
else System 2, else reflex. Each model's context window is the configured one or the
provider's known one; `probe_context_windows()` (once, at start) asks an OpenAI-compatible
endpoint for its own (src/providers/context_probe.py).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

import asyncpg
import httpx2

from src.providers.context_probe import configured_window, window_probe
from src.providers.context_window import window_of
from src.providers.costs import CostLedger, MemoryLedger
from src.providers.embed_minilm import MiniLmEmbedder
from src.providers.embed_wordllama import WordLlamaEmbedder
from src.providers.endpoint_gate import EndpointGate, EndpointGates
from src.providers.endpoint_json import server_root
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
    # one gate per model endpoint (src/providers/endpoint_gate.py); shutdown closes them to internal calls
    endpoints: EndpointGates = field(default_factory=EndpointGates)
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list, repr=False)
    _probe: Callable[[], Awaitable[None]] | None = field(default=None, repr=False)

    @property
    def report(self) -> list[str]:
        """The start-up lines (describe_providers', then each model's context window)."""
        windows = [f"{role} context window: {w.describe()}"
                   for role, llm in (("system1", self.system1), ("system2", self.system2))
                   if (w := window_of(llm)) is not None]
        return [c.line for c in self.choices] + windows

    async def probe_context_windows(self) -> None:
        """Ask an OpenAI-compatible endpoint for its context window (src/providers/
        context_probe.py); once, at start, never raises for what the endpoint does."""
        probe, self._probe = self._probe, None
        if probe is not None:
            await probe()

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
    endpoints: EndpointGates = field(default_factory=EndpointGates)
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    clients: dict[str, object] = field(default_factory=dict)

    def resilience(self, provider: str, *, timeout_s: float | None = None,
                   gate: EndpointGate | None = None) -> Resilience:
        r = self.settings.resilience
        breaker = self.breakers.get(provider)
        if breaker is None:
            breaker = CircuitBreaker(provider, r.breaker_failures, r.breaker_reset_s, clock=self.clock)
            self.breakers[provider] = breaker
        policy = RetryPolicy.from_settings(r)
        if timeout_s is not None:   # a language model (its kind's, issue 27) or a model server's own
            policy = replace(policy, timeout_s=timeout_s)
        return Resilience(policy, breaker, sleep=self.sleep, rng=self.rng, clock=self.clock, gate=gate)

    def http_client(self, timeout_s: float | None = None, **kwargs: object) -> httpx2.AsyncClient:
        # never shorter than the attempt's own timeout (Resilience), which is the one that counts
        timeout = httpx2.Timeout(max(self.settings.resilience.timeout_s, timeout_s or 0.0))
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
                httpx_async_client=self.http_client(self.settings.llm.timeout_for("gemini")),
                timeout=int(max(self.settings.resilience.timeout_s, self.settings.llm.timeout_for("gemini")) * 1000))
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
                max_retries=0, timeout=self.settings.llm.timeout_for("anthropic"),
                http_client=self.http_client(self.settings.llm.timeout_for("anthropic"))
                if self.transport is not None else None)
            self.closers.append(client.close)
            return AnthropicBackend(client, choice.model or "", owns_client=False)
        if choice.kind == "openai_compat":
            from src.providers.llm_openai_compat import OpenAICompatBackend

            base_url = self.settings.llm.base_url or ""
            http = self.clients.get("openai_compat")
            if http is None:
                http = self.clients["openai_compat"] = self.http_client(
                    self.settings.llm.timeout_for("openai_compat"), base_url=base_url)
            return OpenAICompatBackend(http, choice.model or "", api_key=self.secrets.openai_api_key,
                                       owns_client=False)
        raise ValueError(f"no backend for provider kind {choice.kind!r}")

    def language_model(self, choice: Choice) -> LanguageModel:
        if choice.kind == "reflex":
            return ReflexLanguageModel(choice.reason)
        llm = self.settings.llm
        backend = self.backend(choice)
        return ResilientLanguageModel(
            backend, ledger=self.ledger,
            resilience=self.resilience(backend.provider, timeout_s=llm.timeout_for(choice.kind),
                                       gate=self.endpoints.get(choice.kind, llm.concurrency_for(choice.kind))),
            redactor=self.redactor, settings=llm, window=configured_window(llm, choice))

    def embedder(self, choice: Choice) -> Embedder:
        emb = self.settings.embeddings
        if choice.kind == "gemini":
            from src.providers.embed_gemini import GeminiEmbedder

            return GeminiEmbedder(self.genai_client(), resilience=self.resilience("gemini"),
                                  ledger=self.ledger, settings=emb, redactor=self.redactor, clock=self.clock)
        if choice.kind == "minilm":
            return MiniLmEmbedder(dimensions=emb.dimensions)
        if choice.kind == "openai_compat":
            from src.providers.embed_endpoint import PROVIDER, EndpointEmbedder

            http = self.http_client(emb.openai_timeout_s,
                                    base_url=server_root(emb.base_url or self.settings.llm.base_url or ""))
            return EndpointEmbedder(http, settings=emb, ledger=self.ledger, api_key=self.secrets.openai_api_key,
                                    resilience=self.resilience(PROVIDER, timeout_s=emb.openai_timeout_s),
                                    redactor=self.redactor, clock=self.clock)
        return WordLlamaEmbedder(config=emb.wordllama_config, dim=emb.wordllama_dim,
                                 dimensions=emb.dimensions, max_tokens=emb.wordllama_max_tokens)

    def reranker(self, choice: Choice) -> Reranker:
        if choice.kind == "flashrank":
            rr = self.settings.rerank
            return FlashRankReranker(rr.cache_dir, rr.model, rr.max_length)
        if choice.kind == "endpoint":
            from src.providers.rerank_endpoint import PROVIDER, EndpointReranker

            rr = self.settings.rerank
            http = self.http_client(rr.endpoint_timeout_s,
                                    base_url=server_root(rr.base_url or self.settings.llm.base_url or ""))
            return EndpointReranker(http, settings=rr, api_key=self.secrets.openai_api_key,
                                    resilience=self.resilience(PROVIDER, timeout_s=rr.endpoint_timeout_s),
                                    redactor=self.redactor)
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
                             *url_secrets(settings.llm.base_url), *url_secrets(settings.embeddings.base_url),
                             *url_secrets(settings.rerank.base_url)]),
                   http_transport, sleep, rng if rng is not None else random.Random(), clock)
    by_role = {c.role: c for c in choices}
    system1 = ctx.language_model(by_role["system1"])
    system2 = ctx.language_model(by_role["system2"])
    meta = system1 if system1.configured else system2
    return Providers(
        embedder=ctx.embedder(by_role["embeddings"]), reranker=ctx.reranker(by_role["reranker"]),
        system1=system1, system2=system2, meta=meta, ledger=ledger, choices=choices,
        breakers=ctx.breakers, endpoints=ctx.endpoints, _closers=ctx.closers,
        _probe=window_probe(settings.llm, choices, {"system1": system1, "system2": system2},
                            ctx.clients.get("openai_compat"), secrets.openai_api_key))
