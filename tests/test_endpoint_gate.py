"""One gate per model endpoint (issue 27): requests in flight, the user first, shutdown.

A fake slow local model server at the httpx2 transport seam, behind the providers that
`build_providers` builds for `provider: openai_compat`; the ledger is the real `llm_calls`.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict

import httpx2
import pytest

from src.errors import CallCancelled, ProviderTimeout
from src.providers.caller import INTERNAL, USER, Caller
from src.providers.endpoint_gate import EndpointGate
from src.providers.factory import build_providers
from src.providers.protocols import ChatMessage
from src.providers.settings import ProvidersSettings, Secrets
from tests.providers.fakes import Sleeps, openai_ok

MODEL = "qwen2.5-coder-1.5b"


class SlowLocal:
    """A local model server: each request waits (the test's `held` words until released or
    cancelled, the others a moment) and answers with its last user message. It checks what it
    is sent and records the order requests arrived, were answered and were cancelled."""

    def __init__(self, held: tuple[str, ...] = (), hung: tuple[str, ...] = ()):
        self.held = set(held)                       # the first request saying one of these waits
        self.hung = set(hung)                       # every request saying one of these waits
        self.release: dict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.arrived: list[str] = []
        self.answered: list[str] = []
        self.cancelled: list[str] = []
        self.in_flight = 0
        self.peak = 0

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        assert request.url.path == "/v1/chat/completions" and body["model"] == MODEL
        assert body["messages"][-1]["role"] == "user"
        word = body["messages"][-1]["content"]
        self.arrived.append(word)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if word in self.held or word in self.hung:
                self.held.discard(word)
                await self.release[word].wait()
            for _ in range(3):          # a moment: a second request could overlap here
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            self.cancelled.append(word)
            raise
        finally:
            self.in_flight -= 1
        self.answered.append(word)
        return openai_ok(f"you said {word}")


def local_providers(server: SlowLocal, pool=None, **llm):
    settings = ProvidersSettings(
        embeddings={"provider": "wordllama"}, rerank={"provider": "none"},
        llm={"provider": "openai_compat", "base_url": "http://127.0.0.1:8080/v1", "openai_model": MODEL,
             "request_logprobs": False, **llm},
        resilience={"max_attempts": 2})
    return build_providers(settings, Secrets(), pool, "timing-1", http_transport=httpx2.MockTransport(server),
                           sleep=Sleeps())


async def until(condition, what: str) -> None:
    """Let the event loop run until `condition()` holds (no wall clock)."""
    for _ in range(5000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


def ask(llm, word: str, purpose: str, caller: Caller = INTERNAL):
    return llm.generate([ChatMessage("user", word)], purpose=purpose, caller=caller)


async def test_one_request_in_flight_at_a_time_to_a_local_server():
    server = SlowLocal()
    providers = local_providers(server)
    llm = providers.system1
    replies = await asyncio.gather(*(ask(llm, f"question {i}", "system1_answer") for i in range(5)))
    assert [r.text for r in replies] == [f"you said question {i}" for i in range(5)]
    assert server.peak == 1 and sorted(server.answered) == [f"question {i}" for i in range(5)]
    gate = next(iter(providers.endpoints))
    assert (gate.endpoint, gate.max_concurrency, gate.peak) == ("openai_compat", 1, 1)
    assert providers.system2.timeout_s == providers.system1.timeout_s == 300.0   # the local kind's default
    await providers.aclose()


async def test_the_limit_is_a_setting_and_system_1_and_2_share_one_endpoint():
    server = SlowLocal()
    providers = local_providers(server, max_concurrency={"openai_compat": 3})
    await asyncio.gather(*(ask(providers.system1 if i % 2 else providers.system2, f"q{i}", "x") for i in range(6)))
    assert server.peak == 3                      # the fake would have seen more, had the gate let them
    assert [g.endpoint for g in providers.endpoints] == ["openai_compat"]
    await providers.aclose()


async def test_a_user_call_goes_before_queued_internal_work_and_ends_the_one_in_flight(pool):
    server = SlowLocal(held=("consolidate these",))
    providers = local_providers(server, pool)
    llm = providers.system1
    gate = next(iter(providers.endpoints))
    internal = asyncio.create_task(ask(llm, "consolidate these", "consolidation:insights"))
    await until(lambda: server.arrived == ["consolidate these"], "the internal call reached the server")
    queued = asyncio.create_task(ask(llm, "is this a contradiction", "gate_contradiction"))
    await until(lambda: gate.waiting == 1, "the second internal call waits")
    reply = await ask(llm, "hello, it is me", "system1_answer", USER)     # the call says it is the user's
    assert reply.text == "you said hello, it is me"
    await asyncio.gather(internal, queued)
    # the user's call was answered first; the call it interrupted ran again, after the queue
    assert server.answered == ["hello, it is me", "is this a contradiction", "consolidate these"]
    assert server.cancelled == ["consolidate these"] and server.peak == 1 and gate.preemptions == 1
    await providers.aclose()
    rows = await pool.fetch("SELECT purpose, status, ok, error FROM llm_calls ORDER BY purpose, status")
    assert [(r["purpose"], r["status"], r["ok"]) for r in rows] == [
        ("consolidation:insights", "cancelled", False), ("consolidation:insights", "ok", True),
        ("gate_contradiction", "ok", True), ("system1_answer", "ok", True)]
    assert "gave way to the user's turn" in rows[0]["error"]


async def test_shutdown_ends_internal_calls_and_refuses_new_ones_but_not_the_users(pool):
    server = SlowLocal(held=("dream about lighthouses",))
    providers = local_providers(server, pool)
    llm = providers.system1
    dreaming = asyncio.create_task(ask(llm, "dream about lighthouses", "system1_answer"))
    await until(lambda: server.arrived, "the internal call reached the server")
    providers.endpoints.close_internal()
    with pytest.raises(CallCancelled, match="the mind is shutting down"):
        await dreaming
    with pytest.raises(CallCancelled, match="internal call not made"):
        await ask(llm, "another thought", "gate_contradiction")
    assert (await ask(llm, "goodbye", "system1_answer", USER)).text == "you said goodbye"
    assert server.arrived == ["dream about lighthouses", "goodbye"]     # the refused one never went out
    await providers.aclose()
    rows = await pool.fetch("SELECT purpose, status FROM llm_calls ORDER BY id")
    assert sorted((r["purpose"], r["status"]) for r in rows) == [
        ("system1_answer", "cancelled"), ("system1_answer", "ok")]


async def test_a_timed_out_and_a_cancelled_attempt_each_keep_their_ledger_row(pool):
    providers = local_providers(SlowLocal(hung=("never answered",)), pool, timeout_s={"openai_compat": 0.05})
    with pytest.raises(ProviderTimeout, match="no answer within 0.05 s"):
        await ask(providers.system1, "never answered", "system1_answer")
    # the caller stops waiting (the cycle deadline): the attempt is cancelled, its row written beside
    server = SlowLocal(hung=("also never answered",))
    patient = local_providers(server, pool)
    call = asyncio.create_task(ask(patient.system1, "also never answered", "system1_retry"))
    await until(lambda: server.arrived, "the request reached the server")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await until(lambda: server.cancelled, "the server saw the request cancelled")
    for _ in range(500):
        if await pool.fetchval("SELECT count(*) FROM llm_calls WHERE status = 'cancelled'"):
            break
        await asyncio.sleep(0.01)
    rows = await pool.fetch("SELECT purpose, status, ok, error FROM llm_calls ORDER BY id")
    assert [(r["purpose"], r["status"], r["ok"]) for r in rows] == [
        ("system1_answer", "timeout", False), ("system1_answer", "timeout", False),    # max_attempts 2
        ("system1_retry", "cancelled", False)]
    assert "cancelled by its caller" in rows[-1]["error"]
    await providers.aclose()
    await patient.aclose()


async def test_a_waiter_cancelled_before_its_turn_leaves_the_gate_consistent():
    gate = EndpointGate("local", 1)
    entered: list[str] = []

    async def hold(name: str, until_set: asyncio.Event) -> None:
        async with gate.slot():
            entered.append(name)
            await until_set.wait()

    first_done, never = asyncio.Event(), asyncio.Event()
    first = asyncio.create_task(hold("first", first_done))
    await until(lambda: entered == ["first"], "the first holds the slot")
    dropped = asyncio.create_task(hold("dropped", never))
    third = asyncio.create_task(hold("third", asyncio.Event()))
    await until(lambda: gate.waiting == 2, "two wait")
    dropped.cancel()
    first_done.set()
    await first
    await until(lambda: entered == ["first", "third"], "the slot passes over the cancelled waiter")
    assert gate.in_flight == 1 and gate.waiting == 0
    third.cancel()
    await asyncio.gather(dropped, third, return_exceptions=True)
    assert gate.in_flight == 0


def test_timeouts_and_limits_are_per_provider_kind():
    llm = ProvidersSettings(llm={"timeout_s": {"openai_compat": 600}, "max_concurrency": 2}).llm
    assert llm.timeout_s == {"gemini": 30.0, "anthropic": 60.0, "openai_compat": 600.0}
    assert llm.max_concurrency == {"gemini": 2, "anthropic": 2, "openai_compat": 2}
    with pytest.raises(ValueError, match="max_concurrency.openai_compat must be > 0"):
        ProvidersSettings(llm={"max_concurrency": {"openai_compat": 0}})
