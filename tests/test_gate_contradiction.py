"""Contradiction detection, cheapest first (plan §2.8): the negation heuristic, the learned
negation direction (its cache and how well it separates, for the fake and the real offline
embedder), and the isolated LLM micro-call."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from src.gates.contradiction import (
    ContradictionAnswer,
    NegationDirection,
    ask_llm,
    calibrate,
    contradiction_question,
    has_negation,
    learn_direction,
    load_or_learn,
    negation_heuristic,
    screen,
)
from src.gates.negation_pairs import NEGATION_PAIRS, pairs_sha256
from src.providers.costs import MemoryLedger
from src.providers.embed_wordllama import WordLlamaEmbedder
from src.providers.embedding import embed_memories
from src.providers.llm import META_SYSTEM, ResilientLanguageModel
from src.providers.llm_gemini import GeminiBackend
from src.providers.resilience import CircuitBreaker, Resilience, RetryPolicy
from src.providers.settings import LLMSettings, ProvidersSettings
from tests.fakes import HashEmbedder
from tests.gate_fakes import ScriptedMetaLLM
from tests.providers.fakes import FakeServer, Sleeps, gemini_client, gemini_generate_ok

# Held out: none of these sentences is in src/gates/negation_pairs.py.
HELD_OUT_CONTRADICTING = [
    ("I enjoy tea", "I hate tea"),
    ("My sister lives in Paris", "My sister does not live in Paris"),
    ("The train arrived early", "The train arrived late"),
    ("I trust my doctor", "I distrust my doctor"),
    ("The project succeeded", "The project failed"),
    ("Python is easy to learn", "Python is not easy to learn"),
    ("The car works", "The car is broken"),
    ("I passed the exam", "I failed the exam"),
]
HELD_OUT_RELATED = [
    ("I enjoy tea", "I enjoy long walks"),
    ("My sister lives in Paris", "My sister studies law in Paris"),
    ("The train arrived early", "The train was crowded"),
    ("I trust my doctor", "I visit my doctor every spring"),
    ("The project succeeded", "The project had five members"),
    ("Python is easy to learn", "Python is used for data science"),
    ("The car works", "The car is red"),
    ("I passed the exam", "I studied for the exam with Ana"),
]
HELD_OUT_CONFIRMING = [
    ("I enjoy tea", "I really enjoy tea"),
    ("My sister lives in Paris", "My sister's home is in Paris"),
    ("The train arrived early", "The train came in early"),
    ("I trust my doctor", "My doctor is someone I trust"),
    ("The project succeeded", "The project was a success"),
    ("Python is easy to learn", "Learning Python is easy"),
    ("The car works", "The car runs fine"),
    ("I passed the exam", "I got through the exam"),
]


@pytest.mark.parametrize(("a", "b", "verdict"), [
    ("I love coffee", "I do not love coffee", True),
    ("She likes running", "She doesn't like running", True),
    ("The shop is open on Sundays", "The shop is never open on Sundays", True),
    ("I can swim", "I cannot swim", True),
    ("I don't hate it", "I do not hate it", None),       # same parity
    ("I love coffee", "I hate coffee", None),             # no negation word: not this layer's call
    ("I love coffee", "I do not like the rain in Spain", None),   # different content
    ("I love coffee", "I love coffee", None),
    ("My sister likes jazz", "My sister dislikes jazz", True),         # negating prefix
    ("He was happy with the result", "He was unhappy with the result", True),
    ("That is possible", "That is impossible", True),
    ("My sister likes jazz", "My brother dislikes jazz", None),        # two words differ
    ("I form a band", "I inform a band", True),                        # the known false positive
])
def test_negation_heuristic(a, b, verdict):
    assert negation_heuristic(a, b) is verdict


def test_has_negation():
    assert [has_negation(t) for t in ("I won't go", "Nobody came", "I know", "Notable")] == [
        True, True, False, False]


def test_calibrate_on_planted_vectors():
    e = np.eye(4, dtype=np.float32)
    neg_a = np.stack([e[1], e[2], e[3], e[1]])
    neg_b = neg_a + 0.5 * e[0]               # negation moves every pair along e0
    conf_a = np.stack([e[1], e[2]])
    conf_b = conf_a + 0.05 * e[2]            # restatement: a small move elsewhere
    direction, no_below, yes_above, details = calibrate(neg_a, neg_b, conf_a, conf_b)
    assert direction.tolist() == [1.0, 0.0, 0.0, 0.0]
    assert details["separated"] is True
    # the steps of the negation pairs point exactly along e0 (cosine 1), the others across
    # it (cosine 0): NO below min(q10 negation 1.0, median not-opposed 0.0), YES from the
    # midpoint 0.5 on
    assert (no_below, yes_above) == (0.0, pytest.approx(0.5))


async def _judged(embedder, direction, pairs):
    a = await embed_memories(embedder, [p[0] for p in pairs], ["episodic"] * len(pairs))
    b = await embed_memories(embedder, [p[1] for p in pairs], ["episodic"] * len(pairs))
    return [direction.judge(direction.opposition(x, y)) for x, y in zip(a, b, strict=True)]


async def test_the_direction_separates_with_the_hash_embedder():
    embedder = HashEmbedder()
    direction = await learn_direction(embedder)
    # a bag of hashed words can only learn the negation *words*: held-out pairs that use
    # them are opposed; antonyms it never saw (early/late, trust/distrust) stay undecided
    assert await _judged(embedder, direction, HELD_OUT_CONTRADICTING) == [
        True, True, None, None, True, True, None, True]
    assert await _judged(embedder, direction, HELD_OUT_CONFIRMING) == [
        None, None, None, None, None, None, False, True]
    assert await _judged(embedder, direction, HELD_OUT_RELATED) == [
        None, None, None, None, None, False, False, None]
    assert direction.details["separated"] is False


async def test_the_direction_separates_with_wordllama():
    embedder = WordLlamaEmbedder()
    direction = await learn_direction(embedder)
    # measured on held-out pairs: 7 of 8 contradictions opposed, 1 undecided ("The car
    # works" / "The car is broken"), none judged "not opposed"; of the 16 restatements and
    # related statements, 10 conclusively not opposed, 5 left to the micro-call, and one
    # false positive ("I enjoy tea" / "I really enjoy tea")
    assert await _judged(embedder, direction, HELD_OUT_CONTRADICTING) == [
        True, True, True, True, True, True, None, True]
    assert await _judged(embedder, direction, HELD_OUT_CONFIRMING) == [
        True, False, None, False, None, False, None, False]
    assert await _judged(embedder, direction, HELD_OUT_RELATED) == [
        None, False, None, False, False, False, False, None]
    assert direction.no_below == pytest.approx(0.0648, abs=1e-3)
    assert direction.yes_above == pytest.approx(0.1310, abs=1e-3)


async def test_the_direction_is_learned_once_per_model_and_cached_in_the_database(pool):
    embedder = HashEmbedder()
    first = await load_or_learn(pool, embedder)
    assert len(embedder.calls) == 1
    n_texts = len(embedder.calls[0].texts)
    assert embedder.calls[0].task_type == "RETRIEVAL_DOCUMENT"
    assert n_texts == 2 * len(NEGATION_PAIRS) + 2 * 16 + 2 * 16
    again = await load_or_learn(pool, HashEmbedder())     # a new process: read, not learned
    assert np.allclose(first.direction, again.direction)
    assert (again.no_below, again.yes_above, again.n_pairs) == (first.no_below, first.yes_above, 24)
    other = HashEmbedder(model_name="fake-hash-other")
    await load_or_learn(pool, other)
    rows = await pool.fetch("SELECT embed_model, pairs_sha256, n_pairs, details FROM negation_directions "
                            "ORDER BY embed_model")
    assert [(r["embed_model"], r["pairs_sha256"], r["n_pairs"]) for r in rows] == [
        ("fake-hash-768", pairs_sha256(), 24), ("fake-hash-other", pairs_sha256(), 24)]
    assert set(json.loads(rows[0]["details"])) == {"q10_negation_loo", "q50_not_opposed",
                                                   "q90_not_opposed", "separated",
                                                   "negation_loo", "not_opposed"}


async def test_screen_layer_one_then_layer_two():
    embedder = HashEmbedder()
    direction = await learn_direction(embedder)

    async def verdict(a, b):
        va, vb = await embed_memories(embedder, [a, b], ["episodic", "episodic"])
        return screen(a, va, b, vb, direction)

    negated = await verdict("I love coffee", "I do not love coffee")
    assert (negated.contradicts, negated.layer) == (True, "negation")
    # no negation word at all: the learned direction says so (love -> hate is one of its pairs)
    antonym = await verdict("I love tea", "I hate tea")
    assert (antonym.contradicts, antonym.layer) == (True, "embedding")
    assert antonym.opposition > direction.yes_above
    same = await verdict("I love tea", "I love tea!")
    assert (same.contradicts, same.layer, same.opposition) == (False, "embedding", 0.0)
    undecided = await verdict("The office coffee machine is fast", "The office coffee machine is slow")
    assert (undecided.contradicts, undecided.layer) == (None, "embedding")
    assert direction.no_below <= undecided.opposition < direction.yes_above


def test_judge_band():
    d = NegationDirection("m", np.ones(2, dtype=np.float32), 0.1, 0.3, 2)
    assert [d.judge(x) for x in (0.0, 0.0999, 0.1, 0.2999, 0.3, 1.0)] == [
        False, False, None, None, True, True]
    assert d.judge(0.2, no_below=0.25, yes_above=0.25) is False      # a per-model override


async def test_layer_three_is_an_isolated_meta_call_through_the_real_client():
    server = FakeServer().push(gemini_generate_ok(
        '{"contradicts": true, "summary_a": "The office machine is slow"}', 40, 12))
    ledger = MemoryLedger(ProvidersSettings().prices, session_id="s1")
    resilience = Resilience(RetryPolicy(timeout_s=5.0, max_attempts=2),
                            CircuitBreaker("gemini", 5, 30.0), sleep=Sleeps(), rng=random.Random(1))
    llm = ResilientLanguageModel(GeminiBackend(gemini_client(server)), resilience=resilience,
                                 ledger=ledger, settings=LLMSettings(max_output_tokens=256))
    verdict = await ask_llm(llm, "The office coffee machine is slow", "The office coffee machine is fast", 0.02)
    assert verdict == type(verdict)(True, "llm", 0.02, "The office machine is slow")
    [body] = server.bodies
    # the question alone: one user turn, the neutral evaluator instruction, no history or identity
    assert [c["role"] for c in body["contents"]] == ["user"]
    assert body["contents"][0]["parts"][0]["text"].startswith(contradiction_question(
        "The office coffee machine is slow", "The office coffee machine is fast"))
    assert body["systemInstruction"]["parts"][0]["text"].startswith(META_SYSTEM)
    assert [(r.purpose, r.tokens_in, r.tokens_out, r.ok) for r in ledger.records] == [
        ("gate_contradiction", 40, 12, True)]


async def test_layer_three_in_reflex_mode_is_skipped_and_logged(caplog):
    reflex = ScriptedMetaLLM(configured=False)
    with caplog.at_level("INFO", logger="src.gates.contradiction"):
        verdict = await ask_llm(reflex, "a", "b", None)
    assert (verdict.contradicts, verdict.layer, reflex.calls) == (None, "llm_skipped", [])
    assert caplog.messages == ["contradiction layer 3 skipped: no language model is configured"]


def test_the_question_is_bounded():
    q = contradiction_question("a" * 5000, "b")
    assert q.startswith("Statement A: " + "a" * 1000 + "\nStatement B: b\nDoes A contradict B?")
    assert ContradictionAnswer(contradicts=True, summary_a="x").contradicts is True
