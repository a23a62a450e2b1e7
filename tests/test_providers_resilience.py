"""The one resilience policy: backoff with full jitter, bounded retries, timeouts, breaker."""

from __future__ import annotations

import asyncio
import logging
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from src.errors import (
    CircuitOpen,
    ProviderRejected,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)
from src.providers.resilience import CircuitBreaker, Resilience, RetryPolicy, shared_retries
from tests.providers.fakes import FakeClock, Sleeps

POLICY = RetryPolicy(timeout_s=5.0, max_attempts=4, backoff_base_s=0.5, backoff_max_s=20.0)


class Script:
    """An attempt function that fails with the given errors, then returns 'ok'."""

    def __init__(self, *errors: Exception):
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def make(policy: RetryPolicy = POLICY, *, failures: int = 5, reset_s: float = 30.0, seed: int = 7):
    clock, sleeps = FakeClock(), Sleeps()
    breaker = CircuitBreaker("gemini", failures, reset_s, clock=clock)
    return Resilience(policy, breaker, sleep=sleeps, rng=random.Random(seed), clock=clock), breaker, clock, sleeps


def test_backoff_is_full_jitter_with_doubling_ceiling():
    rng, twin = random.Random(3), random.Random(3)
    delays = [POLICY.backoff(n, rng) for n in (1, 2, 3, 4, 7)]
    assert delays == [twin.uniform(0, 0.5), twin.uniform(0, 1.0), twin.uniform(0, 2.0),
                      twin.uniform(0, 4.0), twin.uniform(0, 20.0)]


@given(attempt=st.integers(1, 30), seed=st.integers(0, 2**32 - 1),
       retry_after=st.none() | st.floats(0, 100))
def test_backoff_stays_within_bounds(attempt, seed, retry_after):
    delay = POLICY.backoff(attempt, random.Random(seed), retry_after)
    ceiling = min(20.0, 0.5 * 2 ** (attempt - 1))
    if retry_after is None:
        assert 0.0 <= delay <= ceiling
    else:
        assert min(retry_after, 20.0) <= delay <= max(ceiling, min(retry_after, 20.0))


async def test_transient_failures_are_retried_and_each_retry_logged(caplog):
    res, breaker, _, sleeps = make()
    fn = Script(ProviderUnavailable("HTTP 503"), RateLimited("HTTP 429", retry_after=None))
    with caplog.at_level(logging.WARNING, logger="src.providers.resilience"):
        assert await res.call(fn, what="reply") == "ok"
    twin = random.Random(7)
    expected = [twin.uniform(0, 0.5), twin.uniform(0, 1.0)]
    assert fn.calls == 3
    assert sleeps.delays == expected
    assert [r.getMessage() for r in caplog.records] == [
        f"gemini reply attempt 1/4 failed (ProviderUnavailable: HTTP 503); retrying in {expected[0]:.2f} s",
        f"gemini reply attempt 2/4 failed (RateLimited: HTTP 429); retrying in {expected[1]:.2f} s",
    ]
    assert breaker.state == "closed" and breaker.consecutive_failures == 0


async def test_retry_after_from_the_server_is_honoured():
    res, _, _, sleeps = make()
    fn = Script(RateLimited("slow down", retry_after=5.0))
    assert await res.call(fn, what="embed") == "ok"
    assert sleeps.delays == [5.0]


async def test_non_transient_error_is_not_retried():
    res, breaker, _, sleeps = make()
    fn = Script(ProviderRejected("HTTP 400: bad request"))
    with pytest.raises(ProviderRejected, match="HTTP 400: bad request"):
        await res.call(fn, what="reply")
    assert fn.calls == 1 and sleeps.delays == []
    assert breaker.consecutive_failures == 0


async def test_attempts_are_bounded_and_the_last_error_surfaces():
    res, _, _, sleeps = make(failures=100)
    fn = Script(*[ProviderUnavailable(f"HTTP 500 #{i}") for i in range(1, 6)])
    with pytest.raises(ProviderUnavailable, match="HTTP 500 #4"):
        await res.call(fn, what="reply")
    assert fn.calls == 4 and len(sleeps.delays) == 3


async def test_an_attempt_that_takes_too_long_becomes_provider_timeout():
    policy = RetryPolicy(timeout_s=0.05, max_attempts=2, backoff_base_s=0.5, backoff_max_s=1.0)
    res, _, _, sleeps = make(policy)
    calls = 0

    async def hang() -> str:
        nonlocal calls
        calls += 1
        await asyncio.sleep(10)
        return "never"

    with pytest.raises(ProviderTimeout, match=r"^gemini reply: no answer within 0.05 s$"):
        await res.call(hang, what="reply")
    assert calls == 2 and len(sleeps.delays) == 1


async def test_hooks_receive_latency_for_every_attempt():
    res, _, clock, _ = make()
    events: list[tuple[str, str, float]] = []

    async def slow_then_ok() -> str:
        clock.advance(0.25)
        if not events:
            raise ProviderUnavailable("HTTP 502")
        return "ok"

    async def ok(result, ms):
        events.append(("ok", result, ms))

    async def failed(err, ms):
        events.append(("failed", str(err), ms))

    await res.call(slow_then_ok, what="reply", on_success=ok, on_failure=failed)
    assert events == [("failed", "HTTP 502", 250.0), ("ok", "ok", 250.0)]


async def test_breaker_opens_after_consecutive_failures_and_refuses_calls():
    res, breaker, clock, _ = make(RetryPolicy(max_attempts=1), failures=3, reset_s=30.0)
    for _ in range(3):
        with pytest.raises(ProviderUnavailable):
            await res.call(Script(ProviderUnavailable("HTTP 500")), what="reply")
    assert breaker.state == "open"
    fn = Script()
    clock.advance(10)
    with pytest.raises(CircuitOpen, match=r"^gemini is failing repeatedly; calls paused for 20.0 s more$"):
        await res.call(fn, what="reply")
    assert fn.calls == 0


async def test_half_open_trial_success_closes_the_breaker():
    res, breaker, clock, _ = make(RetryPolicy(max_attempts=1), failures=2, reset_s=30.0)
    for _ in range(2):
        with pytest.raises(ProviderUnavailable):
            await res.call(Script(ProviderUnavailable("HTTP 500")), what="reply")
    clock.advance(30)
    assert breaker.state == "half_open"
    assert await res.call(Script(), what="reply") == "ok"
    assert breaker.state == "closed" and breaker.consecutive_failures == 0


async def test_half_open_trial_failure_reopens_at_once():
    res, breaker, clock, _ = make(RetryPolicy(max_attempts=1), failures=2, reset_s=30.0)
    for _ in range(2):
        with pytest.raises(ProviderUnavailable):
            await res.call(Script(ProviderUnavailable("HTTP 500")), what="reply")
    clock.advance(31)
    with pytest.raises(ProviderUnavailable, match="HTTP 503"):
        await res.call(Script(ProviderUnavailable("HTTP 503")), what="reply")
    assert breaker.state == "open"
    with pytest.raises(CircuitOpen, match="paused for 30.0 s more"):
        await res.call(Script(), what="reply")


async def test_half_open_lets_exactly_one_trial_through():
    res, breaker, clock, _ = make(RetryPolicy(max_attempts=1), failures=1, reset_s=5.0)
    with pytest.raises(ProviderUnavailable):
        await res.call(Script(ProviderUnavailable("HTTP 500")), what="reply")
    clock.advance(5)
    release = asyncio.Event()

    async def trial() -> str:
        await release.wait()
        return "trial"

    first = asyncio.create_task(res.call(trial, what="reply"))
    await asyncio.sleep(0)
    with pytest.raises(CircuitOpen, match="while a trial call runs"):
        await res.call(Script(), what="reply")
    release.set()
    assert await first == "trial"
    assert breaker.state == "closed"


async def test_a_cancelled_trial_frees_the_half_open_slot():
    res, breaker, clock, _ = make(RetryPolicy(max_attempts=1), failures=1, reset_s=5.0)
    with pytest.raises(ProviderUnavailable):
        await res.call(Script(ProviderUnavailable("HTTP 500")), what="reply")
    clock.advance(5)
    task = asyncio.create_task(res.call(asyncio.Event().wait, what="reply"))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await res.call(Script(), what="reply") == "ok"


async def test_non_transient_failures_do_not_open_the_breaker():
    res, breaker, _, _ = make(RetryPolicy(max_attempts=1), failures=2)
    for _ in range(5):
        with pytest.raises(ProviderRejected):
            await res.call(Script(ProviderRejected("HTTP 401")), what="reply")
    assert breaker.state == "closed"


async def test_the_breaker_counts_failed_calls_not_attempts():
    # one bad call (4 attempts, all 5xx) counts once: the next healthy call is not paused
    res, breaker, _, sleeps = make(failures=2)
    bad = Script(*[ProviderUnavailable(f"HTTP 500 #{i}") for i in range(1, 5)])
    with pytest.raises(ProviderUnavailable, match="HTTP 500 #4"):
        await res.call(bad, what="reply")
    assert bad.calls == 4 and len(sleeps.delays) == 3
    assert (breaker.state, breaker.consecutive_failures) == ("closed", 1)
    assert await res.call(Script(), what="reply") == "ok"
    assert (breaker.state, breaker.consecutive_failures) == ("closed", 0)
    # two failed calls in a row open it
    for _ in range(2):
        with pytest.raises(ProviderUnavailable):
            await res.call(Script(*[ProviderUnavailable("HTTP 503")] * 4), what="reply")
    assert breaker.state == "open"
    with pytest.raises(CircuitOpen):
        await res.call(Script(), what="reply")


async def test_concurrent_calls_share_one_retry_budget():
    """Issue 11 Deliver 6: four calls hit by one rate limit retry 3 times in all, not 3 each."""
    res, breaker, _, sleeps = make(failures=100)
    scripts = [Script(*[RateLimited("HTTP 429") for _ in range(10)]) for _ in range(4)]
    with shared_retries(3) as budget:
        outcomes = await asyncio.gather(*(res.call(s, what="micro-call") for s in scripts),
                                        return_exceptions=True)
    assert all(isinstance(o, RateLimited) for o in outcomes)
    assert sum(s.calls for s in scripts) == 4 + 3 and len(sleeps.delays) == 3 and budget.left == 0
    assert breaker.consecutive_failures == 4          # each call failed once, after the group's retries


async def test_a_shared_budget_does_not_hold_back_calls_that_succeed_and_ends_with_its_block():
    res, _, _, _ = make(failures=100)
    flaky, fine = Script(ProviderUnavailable("HTTP 503")), Script()
    with shared_retries(1):
        assert await asyncio.gather(res.call(flaky, what="a"), res.call(fine, what="b")) == ["ok", "ok"]
    later = Script(*[ProviderUnavailable("HTTP 503") for _ in range(3)])
    assert await res.call(later, what="alone") == "ok" and later.calls == 4    # outside: its own 3 retries
