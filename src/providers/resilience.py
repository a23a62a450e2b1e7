"""The one way MoltBot calls an outside service: timeout, retries, circuit breaker, gate.

- Each attempt waits for a place at its endpoint's gate (src/providers/endpoint_gate.py:
  requests in flight per endpoint, the user's turn first), then runs under a timeout (per
  provider kind, `providers.llm.timeout_s`); running out gives ProviderTimeout.
- An attempt ended by the mind itself is CallCancelled and says nothing of the provider
  (no breaker count): one that gave way to the user's turn waits and runs again without
  spending an attempt; one ended by shutdown is raised; one whose caller was cancelled (the
  cycle deadline) is reported to `on_failure` all the same, so the ledger keeps its row.
- An attempt that raises a ProviderError whose `transient` is true (429, 5xx, timeouts,
  empty or malformed bodies) is retried after exponential backoff with full jitter:
  sleep ~ U(0, min(max, base * 2**(attempt-1))), at least a server's Retry-After.
  Attempts are bounded; every retry is logged at WARNING.
- One CircuitBreaker per provider counts consecutive transient failures of calls (a
  call that failed after all its retries counts once; issue 11). After
  `failure_threshold` of them it opens: calls fail at once with CircuitOpen. After
  `reset_after_s` it half-opens and lets exactly one trial call through; success closes
  it, failure opens it again. Non-transient errors (bad request, auth) say nothing about
  the provider's health and leave the count alone.
- Calls made together (`asyncio.gather` under `shared_retries(n)`) share one budget of
  n retries: when a rate limit hits all of them at once, the group retries n times in
  all, not n per call, so a burst cannot multiply its own load (issue 11, Deliver 6).

Sleep, clock and random generator are injected so tests run instantly and reproducibly.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from src.errors import CallCancelled, CircuitOpen, ProviderError, ProviderTimeout, RateLimited
from src.providers.caller import Priority
from src.providers.endpoint_gate import EndpointGate
from src.providers.settings import ResilienceSettings

log = logging.getLogger(__name__)

T = TypeVar("T")
Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]
BreakerState = Literal["closed", "open", "half_open"]


@dataclass(frozen=True)
class RetryPolicy:
    timeout_s: float = 30.0
    max_attempts: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 20.0

    @classmethod
    def from_settings(cls, s: ResilienceSettings) -> RetryPolicy:
        return cls(s.timeout_s, s.max_attempts, s.backoff_base_s, s.backoff_max_s)

    def backoff(self, attempt: int, rng: random.Random, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based); full jitter."""
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempt - 1))
        delay = rng.uniform(0.0, ceiling)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff_max_s))
        return delay


class CircuitBreaker:
    """Closed → open after N consecutive transient failures → half-open after a delay."""

    def __init__(self, provider: str, failure_threshold: int = 5, reset_after_s: float = 30.0,
                 clock: Clock = time.monotonic):
        self.provider = provider
        self.failure_threshold = failure_threshold
        self.reset_after_s = reset_after_s
        self._clock = clock
        self._state: BreakerState = "closed"
        self._failures = 0
        self._opened_at = 0.0
        self._trial_in_flight = False

    @property
    def state(self) -> BreakerState:
        if self._state == "open" and self._clock() - self._opened_at >= self.reset_after_s:
            return "half_open"
        return self._state

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    def before_call(self) -> bool:
        """Admit a call or raise CircuitOpen. Returns True when the call is the half-open trial."""
        state = self.state
        if state == "closed":
            return False
        if state == "half_open" and not self._trial_in_flight:
            self._state = "half_open"
            self._trial_in_flight = True
            log.info("%s circuit half-open: letting one trial call through", self.provider)
            return True
        wait = max(0.0, self.reset_after_s - (self._clock() - self._opened_at))
        raise CircuitOpen(
            f"{self.provider} is failing repeatedly; calls paused"
            + (f" for {wait:.1f} s more" if state == "open" else " while a trial call runs"),
            provider=self.provider,
        )

    def abandon(self, trial: bool) -> None:
        """The call ended without an outcome (cancelled, or a bug): free the trial slot if it held it."""
        if trial:
            self._trial_in_flight = False

    def record_success(self, trial: bool = False) -> None:
        """Any answer from the provider shows it is up: close."""
        if self._state != "closed":
            log.info("%s circuit closed again after a successful call", self.provider)
        self._state = "closed"
        self._failures = 0
        if trial:
            self._trial_in_flight = False

    def record_failure(self, transient: bool, trial: bool = False) -> None:
        """Count a failed call. Only transient failures say the provider is unhealthy."""
        if trial:
            self._trial_in_flight = False
        if not transient:
            if trial:  # the trial reached the provider and got an answer: it is up
                self._state, self._failures = "closed", 0
            return
        self._failures += 1
        if trial or (self._state == "closed" and self._failures >= self.failure_threshold):
            log.warning("%s circuit opened after %d consecutive failures; pausing calls for %.1f s",
                        self.provider, self._failures, self.reset_after_s)
            self._state = "open"
            self._opened_at = self._clock()


FailureHook = Callable[[ProviderError, float], Awaitable[None]]
SuccessHook = Callable[[T, float], Awaitable[None]]


class RetryBudget:
    """Retries left for a group of concurrent calls (see `shared_retries`)."""

    def __init__(self, retries: int):
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        self.left = retries

    def take(self) -> bool:
        """Use one retry; False when the group has none left."""
        if self.left <= 0:
            return False
        self.left -= 1
        return True


# Tasks started by asyncio.gather copy the context, so they see the same budget object.
_GROUP_BUDGET: ContextVar[RetryBudget | None] = ContextVar("moltbot_retry_budget", default=None)


def current_shared_retries() -> RetryBudget | None:
    """The budget the calls of this task share, if they are inside `shared_retries`."""
    return _GROUP_BUDGET.get()


@contextmanager
def shared_retries(retries: int) -> Iterator[RetryBudget]:
    """Calls started inside this block (and the tasks it gathers) share `retries` retries."""
    budget = RetryBudget(retries)
    token = _GROUP_BUDGET.set(budget)
    try:
        yield budget
    finally:
        _GROUP_BUDGET.reset(token)


class Resilience:
    """Runs one logical call with the retry policy, the provider's breaker and its endpoint's gate."""

    def __init__(self, policy: RetryPolicy, breaker: CircuitBreaker, *,
                 sleep: Sleep = asyncio.sleep, rng: random.Random | None = None,
                 clock: Clock = time.monotonic, gate: EndpointGate | None = None):
        self.policy = policy
        self.breaker = breaker
        # no gate (embeddings, tests): nothing limits or preempts the attempts
        self.gate = gate if gate is not None else EndpointGate(breaker.provider, sys.maxsize)
        self._sleep = sleep
        self._rng = rng if rng is not None else random.Random()
        self._clock = clock

    async def call(self, attempt_fn: Callable[[], Awaitable[T]], *, what: str,
                   on_success: SuccessHook[T] | None = None,
                   on_failure: FailureHook | None = None, priority: Priority = "internal") -> T:
        """Await `attempt_fn()` until it succeeds, fails for good, or attempts run out.

        `attempt_fn` must raise ProviderError subclasses only (foreign errors mapped);
        anything else is a bug and propagates untouched. `on_success(result, latency_ms)`
        and `on_failure(error, latency_ms)` are awaited after each attempt that reached the
        provider, outside the timeout and the gate (the cost ledger writes there); an attempt
        its caller cancelled (a cycle deadline, shutdown) is reported as CallCancelled in a
        task of its own, so the cancellation is not held up by the write.
        An internal attempt that gave way to a user's turn (the gate) waits and runs again
        without spending an attempt; one ended by shutdown raises CallCancelled. `priority`:
        the call's place at the endpoint's gate (the user's turn first).
        """
        attempt = 1
        while True:
            trial = self.breaker.before_call()
            tried = await self._attempt(attempt_fn, what, trial, on_failure, priority)
            if tried.error is None:
                self.breaker.record_success(trial)
                if on_success is not None:
                    await on_success(tried.result, tried.latency_ms)
                return tried.result
            err = tried.error
            if isinstance(err, CallCancelled):   # the mind's own doing: says nothing of the provider
                self.breaker.abandon(trial)
                if on_failure is not None:
                    await on_failure(err, tried.latency_ms)
                if tried.final:
                    raise err
                continue
            await self._failed(err, attempt, trial, what, tried.latency_ms, on_failure)
            attempt += 1

    async def _attempt(self, attempt_fn: Callable[[], Awaitable[T]], what: str, trial: bool,
                       on_failure: FailureHook | None, priority: Priority) -> _Tried[T]:
        """One attempt through the gate under the timeout: its result or its error."""
        provider = self.breaker.provider
        try:
            async with self.gate.slot(priority) as slot:
                started = self._clock()
                try:
                    async with slot.scope(self.policy.timeout_s):
                        return _Tried(await attempt_fn(), None, self._ms(started))
                except TimeoutError as exc:
                    if slot.preempted is None:
                        err: ProviderError = ProviderTimeout(
                            f"{provider} {what}: no answer within {self.policy.timeout_s:g} s", provider=provider)
                        err.__cause__ = exc
                        return _Tried(None, err, self._ms(started))
                    return _Tried(None, CallCancelled(f"{provider} {what}: {slot.preempted}", provider=provider),
                                  self._ms(started), final=slot.final)
                except ProviderError as exc:
                    return _Tried(None, exc, self._ms(started))
                except asyncio.CancelledError:
                    _report_cancelled(on_failure, CallCancelled(
                        f"{provider} {what}: cancelled by its caller after {self._ms(started) / 1000:.1f} s",
                        provider=provider), self._ms(started))
                    raise
        except BaseException:
            self.breaker.abandon(trial)
            raise

    async def _failed(self, err: ProviderError, attempt: int, trial: bool, what: str, latency_ms: float,
                      on_failure: FailureHook | None) -> None:
        """After a failed attempt: raise when it was the last, else wait out the backoff."""
        provider, attempts = self.breaker.provider, self.policy.max_attempts
        final = trial or not err.transient or attempt == attempts
        group = _GROUP_BUDGET.get()
        if not final and group is not None and not group.take():
            log.warning("%s %s attempt %d failed (%s: %s); the retries shared by concurrent calls "
                        "are spent, giving up", provider, what, attempt, type(err).__name__, err)
            final = True
        if final:
            # the breaker counts a failed *call* (after its retries), not each attempt:
            # one bad request must not pause the healthy calls that follow it
            self.breaker.record_failure(err.transient, trial)
        if on_failure is not None:
            await on_failure(err, latency_ms)
        if final:
            raise err
        retry_after = err.retry_after if isinstance(err, RateLimited) else None
        delay = self.policy.backoff(attempt, self._rng, retry_after)
        log.warning("%s %s attempt %d/%d failed (%s: %s); retrying in %.2f s",
                    provider, what, attempt, attempts, type(err).__name__, err, delay)
        await self._sleep(delay)

    def _ms(self, started: float) -> float:
        return (self._clock() - started) * 1000.0


@dataclass(frozen=True)
class _Tried(Generic[T]):
    """One attempt's outcome: a result, or the error it ended with."""

    result: T | None
    error: ProviderError | None
    latency_ms: float
    final: bool = False       # a CallCancelled that must not wait and run again


# Reports of cancelled attempts, each in a task of its own; kept here so none is collected mid-write.
_REPORTS: set[asyncio.Task[None]] = set()


def _report_cancelled(on_failure: FailureHook | None, err: CallCancelled, latency_ms: float) -> None:
    """The ledger row of an attempt its caller cancelled, written beside the cancellation."""
    if on_failure is None:
        return

    async def report() -> None:
        try:
            await on_failure(err, latency_ms)
        except Exception:  # noqa: BLE001 - a report must not surface in an unrelated task
            log.exception("could not report a cancelled call")

    task = asyncio.get_running_loop().create_task(report(), name="report-cancelled-call")
    _REPORTS.add(task)
    task.add_done_callback(_REPORTS.discard)
