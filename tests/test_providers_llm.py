"""Language models: Gemini, Anthropic and OpenAI-compatible backends against fake servers."""

from __future__ import annotations

import asyncio
import inspect
import random

import httpx2
import pydantic
import pytest

from src.errors import (
    CircuitOpen,
    MalformedOutput,
    ProviderRejected,
    ProviderSkipped,
    ProviderTimeout,
    ProviderUnavailable,
)
from src.providers.costs import MemoryLedger
from src.providers.llm import META_SYSTEM, ResilientLanguageModel
from src.providers.llm_anthropic import AnthropicBackend
from src.providers.llm_gemini import GeminiBackend
from src.providers.llm_openai_compat import OpenAICompatBackend
from src.providers.llm_reflex import ReflexLanguageModel
from src.providers.protocols import ChatMessage, LanguageModel, TokenLogprob
from src.providers.resilience import CircuitBreaker, Resilience, RetryPolicy
from src.providers.settings import LLMSettings, ProvidersSettings
from src.providers.structured import extract_json, schema_instruction
from tests.providers.fakes import (
    FAKE_ANTHROPIC_KEY,
    FakeServer,
    Sleeps,
    anthropic_client,
    anthropic_error,
    anthropic_ok,
    gemini_client,
    gemini_error,
    gemini_generate_ok,
    openai_ok,
)

# anthropic 2.12 announces the end of life of claude-sonnet-4-5 (2026-11-30) on every call.
pytestmark = pytest.mark.filterwarnings("ignore:The model 'claude-sonnet-4-5' is deprecated")

GEN_PATH = "/v1/models/gemini-2.5-flash-lite:generateContent"
CHAT = [ChatMessage("user", "hi"), ChatMessage("assistant", "hello"), ChatMessage("user", "how are you?")]


class Verdict(pydantic.BaseModel):
    contradicts: bool
    reason: str


def wrap(backend, *, attempts: int = 3, failures: int = 10, timeout_s: float = 5.0,
         ledger: MemoryLedger | None = None, request_logprobs: bool = True) -> ResilientLanguageModel:
    ledger = ledger or MemoryLedger(ProvidersSettings().prices, session_id="s1")
    resilience = Resilience(RetryPolicy(timeout_s=timeout_s, max_attempts=attempts),
                            CircuitBreaker(backend.provider, failures, 30.0),
                            sleep=Sleeps(), rng=random.Random(1))
    return ResilientLanguageModel(backend, resilience=resilience, ledger=ledger,
                                  settings=LLMSettings(max_output_tokens=256, request_logprobs=request_logprobs))


def gemini(server: FakeServer, **kw) -> ResilientLanguageModel:
    return wrap(GeminiBackend(gemini_client(server)), **kw)


def claude(server: FakeServer, **kw) -> ResilientLanguageModel:
    return wrap(AnthropicBackend(anthropic_client(server)), request_logprobs=False, **kw)


def local(server: FakeServer, api_key=None, **kw) -> ResilientLanguageModel:
    http = httpx2.AsyncClient(transport=server.transport, base_url="http://localhost:11434/v1")
    return wrap(OpenAICompatBackend(http, "llama3.2", api_key=api_key), **kw)


# --- Gemini (System 1) ---------------------------------------------------------------------------

async def test_gemini_request_and_reply():
    server = FakeServer().push(gemini_generate_ok("I am fine.", 31, 5, logprobs=[("I", -0.1), (" am", -0.3)]))
    llm = gemini(server)
    result = await llm.generate(CHAT, purpose="reply", system="You are MoltBot.", max_tokens=50,
                                temperature=0.3)
    request = server.requests[0]
    assert request.url.path == GEN_PATH
    assert server.bodies[0] == {
        "contents": [{"parts": [{"text": "hi"}], "role": "user"},
                     {"parts": [{"text": "hello"}], "role": "model"},
                     {"parts": [{"text": "how are you?"}], "role": "user"}],
        "systemInstruction": {"parts": [{"text": "You are MoltBot."}], "role": "user"},
        "generationConfig": {"temperature": 0.3, "maxOutputTokens": 50, "responseLogprobs": True},
    }
    assert (result.text, result.model, result.provider) == ("I am fine.", "gemini-2.5-flash-lite", "gemini")
    assert (result.tokens_in, result.tokens_out, result.finish_reason) == (31, 5, "STOP")
    assert result.logprobs == (TokenLogprob("I", -0.1), TokenLogprob(" am", -0.3))
    assert result.mean_logprob == pytest.approx(-0.2)
    assert llm.logprobs_supported is True
    [row] = llm._ledger.records
    assert (row.purpose, row.tokens_in, row.tokens_out, str(row.cost_usd), row.ok) == (
        "reply", 31, 5, "0.00000510", True)  # 31 × $0.10/M + 5 × $0.40/M


async def test_gemini_refusing_logprobs_is_remembered():
    server = FakeServer(default=lambda r: gemini_generate_ok("ok"))
    server.push(gemini_error(400, "Logprobs is not enabled for models/gemini-2.5-flash-lite",
                             "INVALID_ARGUMENT"))
    llm = gemini(server)
    first = await llm.generate([ChatMessage("user", "q1")], purpose="reply")
    second = await llm.generate([ChatMessage("user", "q2")], purpose="reply")
    assert (first.text, first.logprobs, second.logprobs) == ("ok", None, None)
    assert [b["generationConfig"].get("responseLogprobs") for b in server.bodies] == [True, None, None]
    assert llm.logprobs_supported is False
    assert [(r.ok, r.error) for r in llm._ledger.records] == [
        (False, "ProviderRejected: gemini answered HTTP 400: INVALID_ARGUMENT Logprobs is not enabled "
                "for models/gemini-2.5-flash-lite"),
        (True, None), (True, None)]


async def test_gemini_blocked_prompt_is_rejected_without_retry():
    server = FakeServer(default=lambda r: httpx2.Response(200, json={
        "promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3}}))
    llm = gemini(server)
    with pytest.raises(ProviderRejected, match=r"^gemini blocked the prompt \(SAFETY\)$"):
        await llm.generate([ChatMessage("user", "x")], purpose="reply")
    assert len(server.requests) == 1


async def test_repeated_500s_open_the_gemini_breaker():
    server = FakeServer(default=lambda r: gemini_error(500, "Internal error encountered.", "INTERNAL"))
    llm = gemini(server, attempts=2, failures=2)
    for _ in range(2):   # the breaker counts failed calls (after their retries), not attempts
        with pytest.raises(ProviderUnavailable, match="^gemini answered HTTP 500: INTERNAL Internal error"):
            await llm.generate([ChatMessage("user", "x")], purpose="reply")
    with pytest.raises(CircuitOpen, match="^gemini is failing repeatedly; calls paused for 30.0 s more$"):
        await llm.generate([ChatMessage("user", "x")], purpose="reply")
    assert len(server.requests) == 4  # 2 calls × 2 attempts, then the open breaker refuses
    with pytest.raises(CircuitOpen):
        await llm.generate([ChatMessage("user", "x")], purpose="reply")
    assert len(server.requests) == 4
    assert [r.ok for r in llm._ledger.records] == [False, False, False, False]


async def test_gemini_transport_timeout_and_slow_answer_are_provider_timeouts():
    server = FakeServer().push(httpx2.ReadTimeout("read timed out"), httpx2.ReadTimeout("read timed out"))
    with pytest.raises(ProviderTimeout, match=r"^gemini did not answer in time \(ReadTimeout\)$"):
        await gemini(server, attempts=2).generate([ChatMessage("user", "x")], purpose="reply")

    async def slow(request):
        await asyncio.sleep(5)
        return gemini_generate_ok()

    server = FakeServer(default=slow)
    with pytest.raises(ProviderTimeout, match=r"^gemini reply: no answer within 0.05 s$"):
        await gemini(server, attempts=2, timeout_s=0.05).generate([ChatMessage("user", "x")], purpose="reply")
    assert len(server.requests) == 2


@pytest.mark.parametrize(("answer", "message"), [
    (httpx2.Response(200, content=b"<html>oops</html>"), "gemini sent an unreadable body: JSONDecodeError"),
    (httpx2.Response(200, json={"weird": 1}), "gemini returned no candidates"),
    (httpx2.Response(200, json={"candidates": [{"content": {"parts": []}, "finishReason": "MAX_TOKENS"}]}),
     "gemini returned an empty reply (finish reason MAX_TOKENS)"),
])
async def test_gemini_malformed_bodies_raise_malformed_output(answer, message):
    server = FakeServer(default=lambda r: answer)
    with pytest.raises(MalformedOutput) as info:
        await gemini(server, attempts=2).generate([ChatMessage("user", "x")], purpose="reply")
    assert str(info.value).startswith(message)
    assert len(server.requests) == 2


# --- Anthropic (System 2) ------------------------------------------------------------------------

async def test_anthropic_request_and_reply():
    server = FakeServer().push(anthropic_ok("Deeper answer.", 120, 40))
    llm = claude(server)
    result = await llm.generate(CHAT, purpose="escalation", system="You are MoltBot.", temperature=0.2)
    request = server.requests[0]
    assert str(request.url) == "https://api.anthropic.com/v1/messages"
    assert request.headers["authorization"] == f"Bearer {FAKE_ANTHROPIC_KEY}"
    assert "anthropic-version" in request.headers
    assert server.bodies[0] == {
        "max_tokens": 256, "model": "claude-sonnet-4-5", "system": "You are MoltBot.", "temperature": 0.2,
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                     {"role": "user", "content": "how are you?"}]}
    assert (result.text, result.tokens_in, result.tokens_out, result.logprobs) == ("Deeper answer.", 120, 40, None)
    [row] = llm._ledger.records
    assert (row.model, row.purpose, str(row.cost_usd)) == ("claude-sonnet-4-5", "escalation", "0.00096000")


async def test_anthropic_429_is_retried_after_retry_after():
    server = FakeServer().push(anthropic_error(429, "rate_limit_error", "slow down", {"retry-after": "3"}),
                               anthropic_ok())
    llm = claude(server)
    assert (await llm.generate([ChatMessage("user", "x")], purpose="escalation")).text == "hello from claude"
    assert llm._resilience._sleep.delays == [3.0]
    assert [(r.ok, r.error) for r in llm._ledger.records] == [
        (False, "RateLimited: anthropic answered HTTP 429: slow down"), (True, None)]


@pytest.mark.parametrize(("answer", "error", "message", "requests"), [
    (anthropic_error(401, "authentication_error", "invalid x-api-key"), ProviderRejected,
     "anthropic answered HTTP 401: invalid x-api-key (check ANTHROPIC_API_KEY)", 1),
    (anthropic_error(400, "invalid_request_error", "max_tokens too large"), ProviderRejected,
     "anthropic answered HTTP 400: max_tokens too large", 1),
    (anthropic_error(529, "overloaded_error", "Overloaded"), ProviderUnavailable,
     "anthropic answered HTTP 529: Overloaded", 2),
    (httpx2.Response(200, content=b"{not json"), MalformedOutput,
     "anthropic sent a body that is not a message", 2),
    (httpx2.ReadTimeout("read timed out"), ProviderTimeout, "anthropic did not answer in time", 2),
    (httpx2.ConnectError("connection refused"), ProviderUnavailable,
     "cannot reach anthropic: ConnectError: connection refused", 2),
])
async def test_anthropic_errors_are_typed(answer, error, message, requests):
    server = FakeServer().push(answer, answer)
    with pytest.raises(error) as info:
        await claude(server, attempts=2).generate([ChatMessage("user", "x")], purpose="escalation")
    assert type(info.value) is error
    assert str(info.value) == message
    assert len(server.requests) == requests


# --- OpenAI-compatible endpoint ------------------------------------------------------------------

async def test_openai_compatible_request_and_reply():
    server = FakeServer().push(openai_ok("local answer", 9, 3, logprobs=[("local", -0.5), (" answer", -1.5)]))
    llm = local(server, api_key=pydantic.SecretStr("sk-local-0123456789"))
    result = await llm.generate(CHAT, purpose="reply", system="Be brief.")
    request = server.requests[0]
    assert str(request.url) == "http://localhost:11434/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-local-0123456789"
    assert server.bodies[0] == {
        "model": "llama3.2", "max_tokens": 256, "logprobs": True, "top_logprobs": 1,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"},
                     {"role": "assistant", "content": "hello"}, {"role": "user", "content": "how are you?"}]}
    assert (result.text, result.tokens_in, result.tokens_out, result.mean_logprob) == ("local answer", 9, 3, -1.0)
    assert result.provider == "openai_compat"


async def test_openai_compatible_errors_are_typed():
    server = FakeServer().push(httpx2.Response(503, json={"error": {"message": "model is loading"}}),
                               httpx2.ConnectError("connection refused"))
    with pytest.raises(ProviderUnavailable, match="^cannot reach openai_compat: ConnectError: connection refused$"):
        await local(server, attempts=2).generate([ChatMessage("user", "x")], purpose="reply")
    assert "authorization" not in server.requests[0].headers
    server = FakeServer().push(httpx2.Response(200, json={"choices": []}))
    with pytest.raises(MalformedOutput, match=r"^openai_compat reply lacks choices\[0\].message.content"):
        await local(server, attempts=1).generate([ChatMessage("user", "x")], purpose="reply")


# --- structured output and meta calls ------------------------------------------------------------

async def test_structured_output_valid_first_time():
    server = FakeServer().push(gemini_generate_ok('{"contradicts": true, "reason": "opposite claims"}'))
    llm = gemini(server)
    answer = await llm.generate_structured([ChatMessage("user", "A vs B?")], Verdict, purpose="contradiction",
                                           system="Compare.")
    assert answer.value == Verdict(contradicts=True, reason="opposite claims")
    assert answer.repaired is False
    body = server.bodies[0]
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    assert "responseLogprobs" not in body["generationConfig"]
    assert body["systemInstruction"]["parts"][0]["text"] == "Compare.\n\n" + schema_instruction(Verdict)


async def test_structured_output_gets_one_repair():
    server = FakeServer().push(gemini_generate_ok("Sure! contradicts: yes"),
                               gemini_generate_ok('```json\n{"contradicts": false, "reason": "same"}\n```'))
    llm = gemini(server)
    answer = await llm.generate_structured([ChatMessage("user", "A vs B?")], Verdict, purpose="contradiction")
    assert (answer.value, answer.repaired) == (Verdict(contradicts=False, reason="same"), True)
    contents = server.bodies[1]["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[1]["parts"][0]["text"] == "Sure! contradicts: yes"
    assert contents[2]["parts"][0]["text"].startswith(
        "Your previous reply could not be used: reply is not a valid Verdict: (root): Invalid JSON")
    assert [r.purpose for r in llm._ledger.records] == ["contradiction", "contradiction:repair"]


async def test_structured_output_fails_after_one_repair():
    server = FakeServer(default=lambda r: gemini_generate_ok('{"contradicts": "maybe"}'))
    llm = gemini(server)
    with pytest.raises(MalformedOutput) as info:
        await llm.generate_structured([ChatMessage("user", "A vs B?")], Verdict, purpose="contradiction")
    assert str(info.value) == (
        "gemini-2.5-flash-lite contradiction: still not a valid Verdict after one repair (reply is not a "
        "valid Verdict: contradicts: Input should be a valid boolean, unable to interpret input; "
        "reason: Field required)")
    assert len(server.requests) == 2


def test_extract_json_finds_the_object():
    assert extract_json('```json\n{"a": 1}\n```') == '{"a": 1}'
    assert extract_json('Here it is: {"a": {"b": 2}} hope it helps') == '{"a": {"b": 2}}'
    assert extract_json("  {\"a\": 1}  ") == '{"a": 1}'


async def test_meta_call_sends_the_question_alone():
    server = FakeServer().push(gemini_generate_ok("NO"))
    llm = gemini(server)
    result = await llm.meta_call("Does A contradict B? YES or NO.", purpose="meta:contradiction")
    assert result.text == "NO"
    body = server.bodies[0]
    assert body["contents"] == [{"parts": [{"text": "Does A contradict B? YES or NO."}], "role": "user"}]
    assert body["systemInstruction"]["parts"][0]["text"] == META_SYSTEM
    assert "MoltBot" not in META_SYSTEM


async def test_meta_call_has_no_way_to_pass_history_or_identity():
    params = inspect.signature(ResilientLanguageModel.meta_call).parameters
    assert list(params) == ["self", "question", "purpose", "max_tokens", "caller"]   # whose, not what
    assert list(inspect.signature(ResilientLanguageModel.meta_call_structured).parameters) == [
        "self", "question", "schema", "purpose", "max_tokens", "caller"]
    llm = gemini(FakeServer())
    with pytest.raises(TypeError, match="one question string, never a conversation"):
        await llm.meta_call(CHAT, purpose="meta")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await llm.meta_call("q", purpose="meta", system="You are MoltBot.")  # type: ignore[call-arg]


async def test_meta_call_structured_validates():
    server = FakeServer().push(gemini_generate_ok('{"contradicts": false, "reason": "compatible"}'))
    answer = await gemini(server).meta_call_structured("A: sky is blue. B: grass is green.", Verdict,
                                                       purpose="meta:contradiction")
    assert answer.value == Verdict(contradicts=False, reason="compatible")
    assert server.bodies[0]["contents"] == [
        {"parts": [{"text": "A: sky is blue. B: grass is green."}], "role": "user"}]


# --- reflex mode ---------------------------------------------------------------------------------

async def test_reflex_mode_says_plainly_that_no_model_is_configured():
    llm = ReflexLanguageModel("GEMINI_API_KEY not set, llm.base_url not set")
    assert isinstance(llm, LanguageModel) and llm.configured is False
    expected = ("no language model is configured (GEMINI_API_KEY not set, llm.base_url not set); "
                "skipped reply")
    with pytest.raises(ProviderSkipped) as info:
        await llm.generate([ChatMessage("user", "hi")], purpose="reply")
    assert str(info.value) == expected
    with pytest.raises(ProviderSkipped, match="skipped meta:fok$"):
        await llm.meta_call("q", purpose="meta:fok")
    with pytest.raises(ProviderSkipped, match="skipped gate$"):
        await llm.generate_structured([ChatMessage("user", "hi")], Verdict, purpose="gate")
    with pytest.raises(ProviderSkipped, match="skipped meta:x$"):
        await llm.meta_call_structured("q", Verdict, purpose="meta:x")
