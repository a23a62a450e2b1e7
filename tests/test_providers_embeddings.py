"""Embeddings (plan §2.1): Gemini against a fake HTTP server, WordLlama for real."""

from __future__ import annotations

import random

import httpx2
import numpy as np
import pytest

from src.errors import MalformedOutput
from src.providers.costs import MemoryLedger
from src.providers.embed_gemini import GeminiEmbedder
from src.providers.embed_wordllama import WordLlamaEmbedder
from src.providers.embedding import MEMORY_TYPE_PREFIXES, embed_memories, storage_text
from src.providers.resilience import CircuitBreaker, Resilience, RetryPolicy
from src.providers.settings import ProvidersSettings
from tests.providers.fakes import (
    FAKE_GEMINI_KEY,
    FakeServer,
    Sleeps,
    embed_key,
    gemini_client,
    gemini_embed_ok,
    gemini_error,
    vector_for,
)

EMBED_PATH = "/v1/models/gemini-embedding-001:batchEmbedContents"


def unit(values: list[float]) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def gemini_embedder(server: FakeServer, *, attempts: int = 3, ledger: MemoryLedger | None = None):
    ledger = ledger or MemoryLedger(ProvidersSettings().prices, session_id="s1")
    resilience = Resilience(RetryPolicy(timeout_s=5, max_attempts=attempts), CircuitBreaker("gemini", 10),
                            sleep=Sleeps(), rng=random.Random(1))
    return GeminiEmbedder(gemini_client(server), resilience=resilience, ledger=ledger), ledger


def test_memory_type_prefixes_are_the_plans_eight():
    assert MEMORY_TYPE_PREFIXES == {
        "episodic": "Personal experience memory: ",
        "semantic": "Factual knowledge: ",
        "procedural": "How-to instruction: ",
        "preference": "User preference: ",
        "reflection": "Self-reflection insight: ",
        "correction": "Past error correction: ",
        "narrative": "Identity narrative: ",
        "tension": "Internal contradiction: ",
    }
    assert storage_text("likes jazz", "preference") == "User preference: likes jazz"
    with pytest.raises(ValueError, match=r"^unknown memory type 'dream'; expected one of: episodic, "):
        storage_text("x", "dream")


async def test_gemini_request_shape_for_a_query():
    server = FakeServer(default=gemini_embed_ok)
    embedder, ledger = gemini_embedder(server)
    out = await embedder.embed(["where is my key", "jazz"], "RETRIEVAL_QUERY")
    assert len(server.requests) == 1
    request = server.requests[0]
    assert request.method == "POST"
    assert request.url.host == "generativelanguage.googleapis.com"
    assert request.url.path == EMBED_PATH
    assert request.headers["x-goog-api-key"] == FAKE_GEMINI_KEY
    assert server.bodies[0] == {"requests": [
        {"content": {"parts": [{"text": "where is my key"}], "role": "user"}, "taskType": "RETRIEVAL_QUERY",
         "outputDimensionality": 768, "model": "models/gemini-embedding-001"},
        {"content": {"parts": [{"text": "jazz"}], "role": "user"}, "taskType": "RETRIEVAL_QUERY",
         "outputDimensionality": 768, "model": "models/gemini-embedding-001"},
    ]}
    assert out.shape == (2, 768) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), [1.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(out[0], unit(vector_for(embed_key("where is my key", "RETRIEVAL_QUERY"))),
                               rtol=1e-6)
    assert embedder.model_name == "gemini-embedding-001"
    [row] = ledger.records
    assert (row.provider, row.model, row.purpose, row.ok) == ("gemini", "gemini-embedding-001",
                                                             "embed:RETRIEVAL_QUERY", True)
    # No usage in the reply: words × 1.3, rounded up per text (4 words → 6, 1 word → 2).
    assert (row.tokens_in, row.tokens_out) == (5, 0)   # src/tokens.py: 4 + 1


@pytest.mark.parametrize("task_type", ["RETRIEVAL_DOCUMENT", "RETRIEVAL_QUERY", "SEMANTIC_SIMILARITY",
                                       "CLUSTERING"])
async def test_each_task_type_is_sent_as_given(task_type):
    server = FakeServer(default=gemini_embed_ok)
    embedder, _ = gemini_embedder(server)
    await embedder.embed(["the same text"], task_type)
    assert server.bodies[0]["requests"][0]["taskType"] == task_type
    assert "title" not in server.bodies[0]["requests"][0]


async def test_each_task_type_gives_a_different_vector():
    server = FakeServer(default=gemini_embed_ok)
    embedder, _ = gemini_embedder(server)
    vectors = [await embedder.embed(["the same text"], t) for t in
               ("RETRIEVAL_DOCUMENT", "RETRIEVAL_QUERY", "SEMANTIC_SIMILARITY", "CLUSTERING")]
    for i in range(4):
        for j in range(i + 1, 4):
            assert not np.allclose(vectors[i], vectors[j])


async def test_150_texts_go_out_as_two_batches_of_100_and_50_in_order():
    server = FakeServer(default=gemini_embed_ok)
    embedder, ledger = gemini_embedder(server)
    texts = [f"memory number {i}" for i in range(150)]
    out = await embedder.embed(texts, "SEMANTIC_SIMILARITY")
    assert [len(b["requests"]) for b in server.bodies] == [100, 50]
    assert [r["content"]["parts"][0]["text"] for b in server.bodies for r in b["requests"]] == texts
    expected = np.stack([unit(vector_for(embed_key(t, "SEMANTIC_SIMILARITY"))) for t in texts])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-7)
    assert [r.tokens_in for r in ledger.records] == [400, 200]  # 'memory number N' → 4 tokens each (src/tokens.py)


async def test_storage_groups_by_title_and_prefixes_by_memory_type():
    server = FakeServer(default=gemini_embed_ok)
    embedder, _ = gemini_embedder(server)
    out = await embed_memories(embedder, ["went to Paris", "Paris is in France", "ate a croissant"],
                               ["episodic", "semantic", "episodic"])
    assert [(r["title"], r["taskType"], r["content"]["parts"][0]["text"])
            for b in server.bodies for r in b["requests"]] == [
        ("episodic", "RETRIEVAL_DOCUMENT", "Personal experience memory: went to Paris"),
        ("episodic", "RETRIEVAL_DOCUMENT", "Personal experience memory: ate a croissant"),
        ("semantic", "RETRIEVAL_DOCUMENT", "Factual knowledge: Paris is in France"),
    ]
    assert [len(b["requests"]) for b in server.bodies] == [2, 1]
    expected = unit(vector_for(embed_key("Factual knowledge: Paris is in France", "RETRIEVAL_DOCUMENT",
                                         "semantic")))
    np.testing.assert_allclose(out[1], expected, rtol=1e-6)  # back in input order


async def test_429_then_200_is_retried_and_both_calls_are_in_the_ledger():
    server = FakeServer(default=gemini_embed_ok)
    server.push(gemini_error(429, "Resource has been exhausted", "RESOURCE_EXHAUSTED", retry_delay="2s"))
    embedder, ledger = gemini_embedder(server)
    out = await embedder.embed(["hello there"], "RETRIEVAL_QUERY")
    assert out.shape == (1, 768)
    assert len(server.requests) == 2
    assert embedder._resilience._sleep.delays == [2.0]
    assert [(r.ok, r.error) for r in ledger.records] == [
        (False, "RateLimited: gemini answered HTTP 429: RESOURCE_EXHAUSTED Resource has been exhausted"),
        (True, None),
    ]


@pytest.mark.parametrize(("answer", "message"), [
    (httpx2.Response(200, content=b"{not json"),
     "gemini sent an unreadable body: JSONDecodeError: Expecting property name enclosed in double quotes"),
    (httpx2.Response(200, json={"embeddings": [{"values": [0.1] * 768}]}),
     "gemini returned 1 embeddings for 2 texts"),
    (httpx2.Response(200, json={"embeddings": [{"values": [0.1] * 3}] * 2}),
     "gemini returned a 3-dimensional embedding; asked for 768"),
    (httpx2.Response(200, json={"embeddings": [{"values": [0.0] * 768}] * 2}),
     "gemini returned an unusable embedding: an embedding has zero or non-finite length"),
])
async def test_malformed_bodies_are_retried_then_raise_malformed_output(answer, message):
    server = FakeServer(default=lambda request: answer)
    embedder, ledger = gemini_embedder(server, attempts=2)
    with pytest.raises(MalformedOutput) as info:
        await embedder.embed(["one", "two"], "CLUSTERING")
    assert str(info.value).startswith(message)
    assert len(server.requests) == 2
    assert [r.ok for r in ledger.records] == [False, False]


async def test_input_checks():
    embedder, _ = gemini_embedder(FakeServer())
    with pytest.raises(ValueError, match=r"^cannot embed an empty text \(index 1\)$"):
        await embedder.embed(["fine", "  "], "RETRIEVAL_QUERY")
    with pytest.raises(ValueError, match="^titles are only allowed with task type RETRIEVAL_DOCUMENT$"):
        await embedder.embed(["fine"], "RETRIEVAL_QUERY", titles=["episodic"])
    with pytest.raises(TypeError, match="not a single string"):
        await embedder.embed("fine", "RETRIEVAL_QUERY")
    with pytest.raises(ValueError, match="^unknown task type 'QUESTION_ANSWERING'"):
        await embedder.embed(["fine"], "QUESTION_ANSWERING")
    assert (await embedder.embed([], "RETRIEVAL_QUERY")).shape == (0, 768)


@pytest.fixture(scope="module")
def wordllama() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


async def test_wordllama_shape_norm_padding_and_name(wordllama):
    out = await wordllama.embed(["one small text", "another one", "a third"], "RETRIEVAL_DOCUMENT")
    assert wordllama.model_name == "wordllama-l2-supercat-256"
    assert out.shape == (3, 768) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), [1.0, 1.0, 1.0], rtol=1e-6)
    assert not out[:, 256:].any()
    assert out[:, :256].any(axis=1).all()


async def test_wordllama_similar_sentences_score_higher_than_unrelated(wordllama):
    a, b, c = await wordllama.embed([
        "The cat is sleeping on the sofa.",
        "A kitten naps on the couch.",
        "Quarterly corporate tax filings are due in April.",
    ], "SEMANTIC_SIMILARITY")
    assert float(a @ b) > float(a @ c) + 0.1


async def test_wordllama_is_deterministic_and_ignores_task_type(wordllama):
    first = await wordllama.embed(["User preference: likes jazz"], "RETRIEVAL_DOCUMENT", titles=["preference"])
    second = await wordllama.embed(["User preference: likes jazz"], "RETRIEVAL_QUERY")
    np.testing.assert_array_equal(first, second)
    assert (await wordllama.embed([], "CLUSTERING")).shape == (0, 768)


async def test_gemini_never_sends_text_past_its_input_limit():
    server = FakeServer(default=gemini_embed_ok)
    embedder, _ = gemini_embedder(server)
    assert embedder.max_input_chars == 2048 * 6           # the documented 2,048-token limit
    embedder.max_input_chars = 40
    big = "tide pools " * 100_000                          # a megabyte line
    await embedder.embed([big, "short one"], "RETRIEVAL_DOCUMENT")
    sent = [r["content"]["parts"][0]["text"] for r in server.bodies[0]["requests"]]
    assert sent == [big[:40], "short one"]


async def test_wordllama_truncates_a_huge_text_instead_of_padding_the_batch_to_it():
    embedder = WordLlamaEmbedder(max_tokens=16)
    opening = ("the octopus opened the jar with her arms while we watched from the tank and "
               "then she hid the lid under a rock near the glass where nobody could reach it")
    tail = " and then a very long digression about something else entirely" * 20_000
    alone, huge = await embedder.embed([opening, opening + tail], "RETRIEVAL_DOCUMENT")
    assert np.allclose(alone, huge, atol=1e-6)             # only the first 16 tokens count
    tokens = embedder._model.tokenize([opening + tail, "short"])
    assert [len(t.ids) for t in tokens] == [16, 16]        # padded to 16, not to a megabyte
