"""One exception tree for MoltBot.

    MoltBotError
    ├── ConfigError              runtime.yaml or an environment value is invalid
    ├── StartupError             the service cannot start (database, instance lock)
    │   ├── DatabaseUnreachable
    │   ├── InstanceLocked       another running instance holds the data dir / database
    │   └── MigrationError       a migration failed or an applied file was modified
    ├── InputRejected            user input that cannot be processed (said plainly, nothing lost)
    ├── ProviderError            anything an outside capability (LLM, embeddings, reranker) did wrong
    │   ├── RateLimited          429 / quota; transient
    │   ├── ProviderTimeout      no answer in time; transient
    │   ├── ProviderUnavailable  5xx, connection failure; transient
    │   │   └── CircuitOpen      the provider's circuit breaker is open; not retried (the breaker decides when)
    │   ├── MalformedOutput      empty or unparseable body, JSON that fails validation
    │   ├── ProviderRejected     4xx other than 429: bad request, auth, permission; not transient
    │   │   └── ContextOverflow  a request over the model's context window, refused before it is sent
    │   └── ProviderSkipped      the capability is not configured (reflex mode, no reranker model)
    │       └── CallCancelled    an internal call ended by the mind itself (the user's turn, shutdown)
    └── SafetyViolation          a weight change refused by an enforced safety ceiling

Foreign exceptions (asyncpg, google-genai, anthropic, httpx) are translated in exactly
one place per store or provider, with ``raise Mapped(...) from exc``.
"""

from __future__ import annotations


class MoltBotError(Exception):
    """Base of every error MoltBot raises on purpose."""


class ConfigError(MoltBotError):
    """A configuration key or environment value is invalid; the message names it."""


class StartupError(MoltBotError):
    """The service cannot start; the message is one line meant for the operator."""


class DatabaseUnreachable(StartupError):
    pass


class InstanceLocked(StartupError):
    pass


class MigrationError(StartupError):
    pass


class InputRejected(MoltBotError):
    """Input that cannot be processed as given; the message says why and what to do."""


class ProviderError(MoltBotError):
    """Base for failures of an outside capability.

    ``transient`` tells the retry policy whether trying again can help.
    """

    transient: bool = False

    def __init__(self, message: str, *, provider: str = "", status: int | None = None):
        super().__init__(message)
        self.provider = provider
        self.status = status


class RateLimited(ProviderError):
    transient = True

    def __init__(self, message: str, *, provider: str = "", status: int | None = 429,
                 retry_after: float | None = None):
        super().__init__(message, provider=provider, status=status)
        self.retry_after = retry_after


class ProviderTimeout(ProviderError):
    transient = True


class ProviderUnavailable(ProviderError):
    transient = True


class MalformedOutput(ProviderError):
    transient = True


class ReplyCut(MalformedOutput):
    """A structured reply stopped by its output cap before its JSON closed (issue 38 item 6).
    Not repaired: a repair asked at the same cap is cut again. One call was made; the
    caller asks about fewer items, or again at a larger cap (src/consolidation/deep/structured.py)."""

    def __init__(self, message: str, *, provider: str = "", cap: int):
        super().__init__(message, provider=provider)
        self.cap = cap


class ProviderRejected(ProviderError):
    transient = False


class ContextOverflow(ProviderRejected):
    """The request does not fit the model's context window (src/providers/context_window.py);
    it was not sent. A caller with items to ask about asks about fewer at a time."""


class ProviderSkipped(ProviderError):
    """The capability is not configured; callers degrade (reflex mode, no rerank)."""

    transient = False


class CallCancelled(ProviderSkipped):
    """The mind ended one of its own calls: a user's turn needed the endpoint (the call
    waits and goes again), or it is shutting down (src/providers/endpoint_gate.py).
    Callers degrade as for a skipped capability."""


class BudgetSpent(ProviderSkipped):
    """Internal work reached its background budget (src/providers/budget.py): the call is
    not made; callers degrade as for a skipped capability."""


class SafetyViolation(MoltBotError):
    """An enforced safety ceiling refused a weight change."""

    def __init__(self, ceiling: str, reason: str):
        super().__init__(f"{ceiling}: {reason}")
        self.ceiling = ceiling
        self.reason = reason


class CircuitOpen(ProviderUnavailable):
    """The provider failed repeatedly; calls are refused until the breaker half-opens."""

    transient = False
