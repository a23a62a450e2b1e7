"""The context fits the model (issue 27 item 3): each model's window, asked of the endpoint
or configured; the budget as shares of it; the last-line guard in front of every request.

Fakes only at the HTTP seam (httpx2 MockTransport): a llama.cpp-like server
(tests/context_window_fakes.py) or a scripted one (tests/providers/fakes.py).
"""

from __future__ import annotations

import json
import logging
import random

import httpx2
import pydantic
import pytest

from src.context.fifo import Message
from src.context.prompts import INPUT_CUT
from src.context.request import TurnInput, budget_for, fit_turn
from src.context.settings import ContextBudget
from src.errors import ContextOverflow
from src.providers.context_probe import (
    OLLAMA_DEFAULT,
    endpoint_root,
    from_models,
    from_props,
    from_show,
)
from src.providers.context_window import (
    ContextWindow,
    count_request,
    fit,
    message_tokens,
    most_that_fit,
)
from src.providers.costs import MemoryLedger
from src.providers.factory import build_providers
from src.providers.llm import ResilientLanguageModel
from src.providers.llm_openai_compat import OpenAICompatBackend
from src.providers.protocols import ChatMessage
from src.providers.resilience import CircuitBreaker, Resilience, RetryPolicy
from src.providers.settings import LLMSettings, ProvidersSettings, Secrets
from src.tokens import count_tokens, cut_to_tokens
from tests.context_window_fakes import FakeLlamaServer
from tests.providers.fakes import FakeServer, Sleeps, openai_ok

BASE = "http://127.0.0.1:8080/v1"
PROSE = "The lighthouse keeper counted the ships that passed in the fog, one by one, every night. "


def local_settings(**llm) -> ProvidersSettings:
    return ProvidersSettings.model_validate({
        "llm": {"provider": "openai_compat", "base_url": BASE, "openai_model": "qwen2.5-1.5b", **llm},
        "embeddings": {"provider": "wordllama"}, "rerank": {"provider": "none"}})


def local_model(server: FakeServer, window: ContextWindow, *, max_output_tokens: int = 256) -> ResilientLanguageModel:
    http = httpx2.AsyncClient(transport=server.transport, base_url=BASE)
    resilience = Resilience(RetryPolicy(timeout_s=5, max_attempts=1), CircuitBreaker("openai_compat", 10, 30.0),
                            sleep=Sleeps(), rng=random.Random(1))
    return ResilientLanguageModel(OpenAICompatBackend(http, "qwen2.5-1.5b"), resilience=resilience,
                                  ledger=MemoryLedger(ProvidersSettings().prices, session_id="s1"),
                                  settings=LLMSettings(max_output_tokens=max_output_tokens, request_logprobs=False),
                                  window=window)


# --- what the endpoint says -------------------------------------------------------------------

def test_the_endpoint_answers_in_each_servers_shape():
    assert endpoint_root("http://h:8080/v1/") == endpoint_root("http://h:8080/v1") == "http://h:8080"
    assert endpoint_root("http://h:11434") == "http://h:11434"
    # llama.cpp: one slot's n_ctx; a newer server's top-level n_ctx (all slots) is not the slot's
    assert from_props({"default_generation_settings": {"n_ctx": 4096}}) == 4096
    assert from_props({"n_ctx": 16384, "default_generation_settings": {"n_ctx": 4096}}) == 4096
    assert from_props({"n_ctx": 8192}) == 8192
    assert from_props({"default_generation_settings": {}}) is None and from_props([]) is None
    # Ollama: num_ctx when the Modelfile sets it, else the model's length within the server default
    info = {"general.architecture": "qwen2", "qwen2.context_length": 32768}
    assert from_show({"parameters": "stop \"<|im_end|>\"\nnum_ctx                        8192", "model_info": info}) == 8192
    assert from_show({"parameters": "temperature 0.7", "model_info": info}) == OLLAMA_DEFAULT
    assert from_show({"model_info": {"general.architecture": "llama", "llama.context_length": 2048}}) == 2048
    assert from_show({"model_info": {}}) is None
    # vLLM
    models = {"data": [{"id": "a", "max_model_len": 32768}, {"id": "qwen2.5-1.5b", "max_model_len": 8192}]}
    assert from_models(models, "qwen2.5-1.5b") == 8192 and from_models(models, "other") is None


async def test_the_start_up_probe_reads_llama_cpp_props_once_and_the_report_says_so():
    server = FakeLlamaServer(n_ctx=4096)
    providers = build_providers(local_settings(), Secrets(), None, "s1",
                                http_transport=httpx2.MockTransport(server.handle))
    assert providers.system1.window.tokens == 4096      # the known default before anything was asked
    await providers.probe_context_windows()
    await providers.probe_context_windows()             # once per start
    assert server.props_requests == 1
    for llm in (providers.system1, providers.system2):
        assert llm.window.tokens == 4096 and llm.window.source == "llama.cpp /props at http://127.0.0.1:8080"
        assert llm.max_output_tokens == 1024             # a quarter of 4,096
    assert providers.system1.window is providers.system2.window   # one endpoint, one model, one count
    assert "system1 context window: 4,096 tokens (llama.cpp /props at http://127.0.0.1:8080; our counts × 1.30)" \
        in providers.report
    await providers.aclose()


async def test_ollama_is_asked_after_props_and_a_small_window_caps_the_reply():
    def ollama(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/api/show":
            assert request.method == "POST" and json.loads(request.content)["model"] == "qwen2.5-1.5b"
            return httpx2.Response(200, json={"parameters": "num_ctx 2048",
                                              "model_info": {"general.architecture": "qwen2",
                                                             "qwen2.context_length": 32768}})
        return httpx2.Response(404, text="404 page not found")
    server = FakeServer(ollama)
    providers = build_providers(local_settings(base_url="http://localhost:11434/v1"), Secrets(), None, "s1",
                                http_transport=server.transport)
    await providers.probe_context_windows()
    assert [f"{r.method} {r.url}" for r in server.requests] == [
        "GET http://localhost:11434/props", "POST http://localhost:11434/api/show"]
    assert providers.system1.window.tokens == 2048 and providers.system1.max_output_tokens == 512
    await providers.aclose()
    # a larger window gives back the reply the settings asked for (capped by the 4,096 default first)
    big = FakeLlamaServer(n_ctx=32768)
    providers = build_providers(local_settings(max_output_tokens=4000), Secrets(), None, "s1",
                                http_transport=httpx2.MockTransport(big.handle))
    assert providers.system1.max_output_tokens == 1024
    await providers.probe_context_windows()
    assert providers.system1.max_output_tokens == 4000
    await providers.aclose()


async def test_a_silent_endpoint_keeps_the_default_and_says_so_once(caplog):
    server = FakeServer(lambda request: httpx2.Response(404))
    providers = build_providers(local_settings(), Secrets(), None, "s1", http_transport=server.transport)
    with caplog.at_level(logging.WARNING, logger="src.providers.context_probe"):
        await providers.probe_context_windows()
        await providers.probe_context_windows()
    assert len(server.requests) == 3                     # props, api/show, v1/models: once
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith("http://127.0.0.1:8080 did not say its context window (llama.cpp /props: HTTP 404; "
                           "Ollama /api/show: HTTP 404; vLLM /v1/models: HTTP 404); using 4,096 tokens")
    assert "Set providers.llm.context_window" in line
    assert providers.system1.window.tokens == 4096
    await providers.aclose()
    # an endpoint that does not answer in time is asked once, not three times
    hung = FakeServer().push(httpx2.ReadTimeout("timed out"))
    providers = build_providers(local_settings(), Secrets(), None, "s1", http_transport=hung.transport)
    await providers.probe_context_windows()
    assert len(hung.requests) == 1 and providers.system1.window.tokens == 4096
    await providers.aclose()


async def test_a_configured_window_is_not_asked_and_each_system_has_its_own():
    server = FakeServer()                                # any request would fail the test
    providers = build_providers(local_settings(context_window={"system1": 8192, "system2": 32768}), Secrets(),
                                None, "s1", http_transport=server.transport)
    await providers.probe_context_windows()
    assert server.requests == []
    assert (providers.system1.window.tokens, providers.system2.window.tokens) == (8192, 32768)
    assert providers.system1.window.source == "providers.llm.context_window.system1"
    one = local_settings(context_window=16384).llm.context_window
    assert (one.system1, one.system2) == (16384, 16384)
    with pytest.raises(pydantic.ValidationError):
        local_settings(context_window={"system1": 100})
    await providers.aclose()


# --- the budget scales to the window ------------------------------------------------------------

def test_the_budget_is_shares_of_the_window_with_floors_and_the_plans_caps():
    budget = ContextBudget()
    big = budget.resolve(128_000, 4000)
    assert (big.immutable, big.identity_expected, big.identity_cap, big.situational, big.cognitive_state,
            big.conversation_tokens) == (100, 1500, 3000, 2000, 200, 118_700)       # plan §3.2
    small = budget.resolve(4096, 1024)
    assert (small.identity_cap, small.situational, small.cognitive_state) == (409, 614, 200)
    assert small.conversation_tokens == 4096 - 1024 - 100 - 409 - 614 - 200
    floors = budget.resolve(2000, 500)
    assert (floors.identity_cap, floors.situational, floors.identity_expected) == (200, 300, 100)
    tiny = budget.resolve(1024, 256)                     # the floors would leave no conversation
    assert tiny.conversation_tokens >= budget.conversation_min
    assert tiny.identity_expected <= tiny.identity_cap and tiny.immutable < 100
    assert budget.resolve(4096, 1024).resolve(128_000, 4000) == small   # resolved once, for one window


def test_the_budget_follows_system1s_window_as_our_counts_can_fill_it():
    model = local_model(FakeServer(), ContextWindow(4096, "llama.cpp /props", margin=1.3), max_output_tokens=1024)
    budget = budget_for(ContextBudget(), model)
    assert budget.output_reserve == 1024
    assert budget.context_window == int((4096 - 1024) / 1.3) + 1024          # 3,387 of our tokens
    assert budget.conversation_tokens == budget.context_window - 1024 - 100 - 338 - 508 - 169
    fixed = budget_for(ContextBudget(context_window=10_300, identity_cap=3000, situational=2000,
                                     output_reserve=4000), model)
    assert fixed.conversation_tokens == 1000                                 # a window set here wins
    no_window = budget_for(ContextBudget(), object())                       # reflex mode, a test double
    assert no_window.context_window == 128_000 and no_window.output_reserve == 1024
    gemini = local_model(FakeServer(), ContextWindow.known("gemini"), max_output_tokens=1024)
    assert gemini.window.tokens == 1_048_576
    assert budget_for(ContextBudget(), gemini).context_window == 128_000        # window_max: the plan's 128k
    assert budget_for(ContextBudget(window_max=None), gemini).context_window > 800_000


# --- the last line: every request fits before it is sent ----------------------------------------

async def test_history_before_the_pinned_input_gives_way_and_the_input_never_does():
    server = FakeServer().push(openai_ok("fine"))
    llm = local_model(server, ContextWindow(1024, "test", margin=1.0), max_output_tokens=256)
    history = [ChatMessage("user" if i % 2 == 0 else "assistant", f"message {i}: " + PROSE * 3) for i in range(12)]
    question = ChatMessage("user", "what did the keeper count?", pinned=True)
    await llm.generate([*history, question], purpose="system1_answer", system="Be brief.")
    sent = server.bodies[0]["messages"]
    assert sent[0] == {"role": "system", "content": "Be brief."}
    assert sent[-1]["content"] == "what did the keeper count?" and sent[1]["role"] == "user"
    kept = [m["content"] for m in sent[1:-1]]
    assert 0 < len(kept) < 12 and kept == [m.content for m in history[12 - len(kept):]]   # the newest
    assert count_request("Be brief.", [*history[12 - len(kept):], question]) + 256 <= 1024
    server.push(openai_ok("fine"))
    await llm.generate([question], purpose="system2_escalation", max_tokens=2048)
    assert server.bodies[1]["max_tokens"] == 256                   # a reply takes at most a quarter


async def test_a_request_that_cannot_fit_is_refused_and_never_sent(caplog):
    server = FakeServer()
    ledger_llm = local_model(server, ContextWindow(1024, "test", margin=1.0))
    with caplog.at_level(logging.WARNING, logger="src.providers.llm"), \
            pytest.raises(ContextOverflow, match=r"^qwen2.5-1.5b consolidation:questions: the request is ~[\d,]+ "
                                                 r"tokens with a reply of up to 256, over the context window of "
                                                 r"1,024 tokens \(test; our counts × 1.00\); not sent$"):
        await ledger_llm.meta_call(PROSE * 80, purpose="consolidation:questions")
    assert server.requests == [] and not ledger_llm._ledger.records   # nothing sent, nothing billed
    assert "not sent" in caplog.records[-1].getMessage()
    # the input pinned: older history may go, the input itself never
    with pytest.raises(ContextOverflow):
        await ledger_llm.generate([ChatMessage("user", "hi"), ChatMessage("user", PROSE * 80, pinned=True)],
                                  purpose="system1_answer")
    assert server.requests == []


async def test_the_endpoints_refusal_teaches_the_window_and_the_request_goes_again_shorter():
    refusal = httpx2.Response(400, json={"error": {"code": 400, "type": "exceed_context_size_error",
                                                   "message": "request (1400 tokens) exceeds the available "
                                                              "context size (1024 tokens), try increasing it"}})
    server = FakeServer().push(refusal, openai_ok("fine", tokens_in=1))
    window = ContextWindow(2048, "a guess", margin=1.0)
    llm = local_model(server, window)
    history = [ChatMessage("user" if i % 2 == 0 else "assistant", PROSE * 3) for i in range(10)]
    counted = count_request(None, [*history, ChatMessage("user", "so?")])
    result = await llm.generate([*history, ChatMessage("user", "so?", pinned=True)], purpose="system1_answer")
    assert result.text == "fine" and len(server.requests) == 2
    assert window.tokens == 1024 and window.source == "the endpoint's refusal"
    assert window.margin == pytest.approx(1.1 * 1400 / counted)
    assert len(server.bodies[1]["messages"]) < len(server.bodies[0]["messages"])


def test_the_margin_only_grows_with_what_the_endpoint_counts():
    window = ContextWindow(4096, "test", margin=1.3)
    window.observe(1000, 900)                  # an endpoint that counts fewer: the margin stays
    window.observe(100, 400)                   # too small to tell the ratio from the template
    assert window.margin == 1.3
    window.observe(1000, 1350)
    assert window.margin == pytest.approx(1.1 * 1.35)
    assert window.prompt_limit(1024) == int((4096 - 1024) / (1.1 * 1.35))
    assert not window.learn_from("HTTP 401: invalid api key", 1000)
    assert window.learn_from("the request exceeds the available context size, try increasing it", 1000)
    assert window.margin == pytest.approx(1.1 * 1.35 * 1.25)


def test_fit_keeps_a_conversation_opening_with_the_user():
    window = ContextWindow(400, "test", margin=1.0)
    messages = [ChatMessage("user", PROSE * 6), ChatMessage("assistant", PROSE * 6), ChatMessage("user", PROSE),
                ChatMessage("assistant", "ok"), ChatMessage("user", "and now?", pinned=True),
                ChatMessage("assistant", "a draft"), ChatMessage("user", "sure?")]
    fitted = fit(window, None, messages, 200, what="test")
    assert fitted.messages[0].role == "user" and fitted.messages[-3:] == tuple(messages[-3:])
    assert fitted.dropped >= 2 and fitted.counted + 200 <= 400


# --- the loop's turn and the callers that ask about many items -------------------------------

def test_the_turn_measures_the_whole_prompt_and_cuts_only_an_input_that_cannot_fit(caplog):
    llm = local_model(FakeServer(), ContextWindow(2048, "test", margin=1.3), max_output_tokens=512)
    budget = budget_for(ContextBudget(), llm)
    system = "You are MoltBot.\n\n" + PROSE * 10
    history = [Message("user" if i % 2 == 0 else "assistant", f"{i} " + PROSE * 2,
                       message_tokens(ChatMessage("user", f"{i} " + PROSE * 2))) for i in range(30)]
    turn = fit_turn(llm, budget, system, history, "and the fog?", limit=budget.conversation_tokens)
    assert turn.messages[-1] == ChatMessage("user", "and the fog?") and turn.messages[-1].pinned
    assert 0 < turn.history < 30 and not turn.cut
    assert turn.messages[0].content == history[30 - turn.history].content    # the newest kept, oldest first
    assert count_request(system, turn.messages) <= llm.window.prompt_limit(512)
    assert fit_turn(llm, budget, system, history, "x", limit=0).history == 0   # the share, not only the room
    huge = PROSE * 400
    with caplog.at_level(logging.WARNING, logger="src.context.request"):
        cut = fit_turn(llm, budget, system, history, huge, limit=budget.conversation_tokens)
    assert cut.cut and cut.history == 0 and cut.messages[-1].content.endswith(INPUT_CUT)
    assert huge.startswith(cut.messages[-1].content[:-len(INPUT_CUT)])
    assert count_request(system, cut.messages) <= llm.window.prompt_limit(512)
    assert "does not fit the context window" in caplog.records[-1].getMessage()


def test_a_long_paste_never_hides_the_messages_sent_with_it():
    """Issue 41 item 8: a combined turn that does not fit cuts its longest message, not its end."""
    from src.loop.turns import combined_texts
    llm = local_model(FakeServer(), ContextWindow(2048, "test", margin=1.3), max_output_tokens=512)
    budget = budget_for(ContextBudget(), llm)
    system = "You are MoltBot.\n\n" + PROSE * 10
    paste, question, move = PROSE * 400, "what is my sister's name?", "I moved to Lisbon last week"
    parts = [paste, question, move]
    turn = fit_turn(llm, budget, system, [], TurnInput(combined_texts(parts), parts=parts, render=combined_texts),
                    limit=budget.conversation_tokens)
    sent = turn.messages[-1].content
    assert turn.cut and sent.endswith(f"2. {question}\n3. {move}")        # both short messages whole
    assert f"{INPUT_CUT}\n2. " in sent and sent.startswith(f"[3 messages from the user, taken together as one "
                                                           f"turn]\n1. {PROSE[:40]}")
    assert count_request(system, turn.messages) <= llm.window.prompt_limit(512)


def test_most_that_fit_and_cutting_text_to_tokens():
    llm = local_model(FakeServer(), ContextWindow(2048, "test", margin=1.0), max_output_tokens=256)
    items = [f"[{i}] " + PROSE for i in range(100)]
    k = most_that_fit(llm, len(items), lambda n: "\n".join(items[:n]), meta=True)
    assert 0 < k < 100
    assert message_tokens(ChatMessage("user", "\n".join(items[:k]))) <= llm.room(meta=True)
    assert message_tokens(ChatMessage("user", "\n".join(items[:k + 1]))) > llm.room(meta=True)
    assert most_that_fit(object(), 100, lambda n: "x" * n) == 100              # no window stated
    text = PROSE * 20
    for keep in ("head", "tail"):
        part = cut_to_tokens(text, 50, keep=keep)
        assert count_tokens(part) <= 50 < count_tokens(part + " lighthouse")
        assert text.startswith(part) if keep == "head" else text.endswith(part)
    assert cut_to_tokens("short", 50) == "short" and cut_to_tokens(text, 0) == ""
