"""Escalation and confidence that mean something with one small local model (issue 27 item 7).

- The contradiction judge compares statements only: a question or chatter is never
  judged contradictory, and no micro-call is spent on it.
- System 2 = System 1 (same provider, model and base URL): no escalation call; the
  decision is recorded.
- Where System 1 returns token logprobs they give the confidence and the FOK call is
  skipped; a missing `Confidence:` line alone never forces a retry or escalation then.
- The `Confidence:` line is read (and stripped) in the forms small models write it.

Fakes only at the provider seam (ScriptedLLM, ScriptedMetaLLM, an httpx2 transport that
is never reached); real PostgreSQL for the exit gate and the escalations rows.
"""

from __future__ import annotations

import json
import random

import httpx2
import numpy as np
import pytest

from src.gates.contradiction import learn_direction, screen
from src.gates.memory_gate import Gates
from src.metacognition.confidence import (
    FeelingOfKnowing,
    score_answer,
    strip_verbalized_confidence,
    verbalized_confidence,
)
from src.metacognition.escalation import (
    BY_LOGPROBS,
    Asking,
    EscalationTriggers,
    Recording,
    loop_before_escalate,
)
from src.metacognition.roles import same_model
from src.providers.costs import MemoryLedger
from src.providers.embedding import embed_memories
from src.providers.llm import ResilientLanguageModel
from src.providers.llm_openai_compat import OpenAICompatBackend
from src.providers.protocols import ChatMessage
from src.providers.resilience import CircuitBreaker, Resilience, RetryPolicy
from src.providers.settings import ProvidersSettings
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.fakes import HashEmbedder
from tests.fakes_llm import ScriptedLLM, fok, result
from tests.gate_fakes import ScriptedMetaLLM, attention_for, gate_settings

FOCUS = "What is the capital of Portugal?"
MESSAGES = (ChatMessage("user", FOCUS),)
HEDGED = "I'm not sure. Maybe it is Porto? I think so."
PLAIN = "The capital of Portugal is Lisbon."          # no Confidence line, as 18 of 20 real replies
SURE = [-0.05, -0.02, -0.1, -0.01, -0.04, -0.03]      # token logprobs of a fluent answer


# --- the contradiction judge: statements only ---------------------------------------------------

async def test_a_question_or_chatter_is_never_judged_contradictory():
    embedder = HashEmbedder()
    direction = await learn_direction(embedder)

    async def verdict(a, b):
        va, vb = await embed_memories(embedder, [a, b], ["episodic", "episodic"])
        return screen(a, va, b, vb, direction)

    # the negation heuristic alone would call this one a contradiction (parity differs)
    question = await verdict("Don't I live in Lisbon?", "I live in Lisbon")
    assert (question.contradicts, question.layer) == (False, "not_statement")
    chatter = await verdict("I live in Lisbon", "ok thanks!")
    assert (chatter.contradicts, chatter.layer) == (False, "not_statement")
    stated = await verdict("I do not live in Lisbon", "I live in Lisbon")
    assert (stated.contradicts, stated.layer) == (True, "negation")


async def test_the_exit_gate_never_flags_a_question_and_never_asks_the_judge_about_it(pool):
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many([NewMemory("I am a marine biologist working in Lisbon.")])
    judge = ScriptedMetaLLM(verdict=lambda a, b: True)   # a judge that, like the small model, says YES
    gates = Gates.build(pool, embedder, judge, gate_settings(noise_floor=0.0), Safety(), rng=random.Random(2))
    texts = ["Where am I a marine biologist working?",                     # cosine 0.86 to the memory
             "I am not a marine biologist working in Lisbon."]
    ids = [(await gates.admit(t, exchange=False)).scratch_id for t in texts]
    vecs = await embed_memories(embedder, texts, ["episodic"] * 2)
    await gates.note_focus(ids, attention_for(vecs, [0.6, 0.6]))
    await gates.exit.flush(reason="test")
    rows = {r["content_preview"][:12]: r for r in await pool.fetch(
        "SELECT content_preview, contradiction_layer, cell_novelty, action FROM gate_decisions WHERE gate = 'exit'")}
    asked = rows["Where am I a"]
    assert (asked["contradiction_layer"], asked["action"]) == ("not_statement", "drop")
    assert asked["cell_novelty"] != "contradicting"
    assert rows["I am not a m"]["cell_novelty"] == "contradicting"    # a statement is still judged
    assert judge.calls == []          # the statement is settled by layer 1, the question by its kind
    flagged = await pool.fetch("SELECT content FROM memories WHERE metadata->>'flag' = 'contradiction'")
    assert [r["content"] for r in flagged] == ["I am not a marine biologist working in Lisbon."]


# --- System 2 = System 1 -----------------------------------------------------------------------

def _local(base_url: str, model: str = "qwen2.5-coder-1.5b") -> ResilientLanguageModel:
    def refuse(request):   # never reached: identity is read, not asked
        raise AssertionError(f"unexpected request {request.url}")
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(refuse), base_url=base_url)
    return ResilientLanguageModel(
        OpenAICompatBackend(http, model),
        resilience=Resilience(RetryPolicy(timeout_s=1.0, max_attempts=1), CircuitBreaker("openai_compat", 3, 30.0)),
        ledger=MemoryLedger(ProvidersSettings().prices, session_id="s1"))


def test_the_same_model_is_the_same_provider_model_and_base_url():
    here = _local("http://127.0.0.1:8080/v1")
    assert same_model(here, _local("http://127.0.0.1:8080/v1"))
    assert not same_model(here, _local("http://10.0.0.2:8080/v1"))            # another server
    assert not same_model(here, _local("http://127.0.0.1:8080/v1", "qwen2.5-7b"))
    assert not same_model(ScriptedLLM(configured=False), ScriptedLLM(configured=False))
    assert same_model(ScriptedLLM(), ScriptedLLM()) and not same_model(ScriptedLLM(), ScriptedLLM(model="s2"))


@pytest.mark.parametrize("triggers", [EscalationTriggers(), EscalationTriggers(identity_touched=True)])
async def test_no_escalation_call_when_system2_is_system1_and_the_row_says_why(pool, triggers):
    s1 = ScriptedLLM(meta=fok("PARTIAL", 0.5)).say(HEDGED, HEDGED)
    store = MemoryStore(pool, HashEmbedder())
    out = await loop_before_escalate(s1, s1, MESSAGES, focus=FOCUS, threshold=0.55,
                                     asking=Asking(triggers=triggers), recording=Recording(store))
    assert s1.of("generate_structured") == []                       # System 2 was never called
    assert (out.path, out.escalated, out.system2_ok) == ("system1_fallback", False, None)
    assert out.answer == strip_verbalized_confidence(HEDGED)
    assert "system2 is the same model as system1 (scripted-1): no escalation call" in out.reason
    row = await pool.fetchrow("SELECT path, escalated, system2_ok, reason, triggers FROM escalations")
    assert (row["path"], row["escalated"], row["system2_ok"]) == ("system1_fallback", False, None)
    assert row["reason"] == out.reason
    assert json.loads(row["triggers"]) == out.triggers.fired() and out.triggers.fired()


# --- logprobs give the confidence ----------------------------------------------------------------

async def test_with_logprobs_no_fok_call_and_no_confidence_line_needed():
    s1 = ScriptedLLM().say(result(PLAIN, logprobs=SURE))    # no meta script: a FOK call would fail
    s1.logprobs_supported = True                            # what the wrapper learned on a first call
    s2 = ScriptedLLM(model="scripted-2")
    out = await loop_before_escalate(s1, s2, MESSAGES, focus=FOCUS, threshold=0.8)
    assert s1.of("meta_call_structured") == [] and s2.calls == []
    assert (out.path, out.fok.skipped, out.confidence.verbalized) == ("system1", BY_LOGPROBS, None)
    # the composite is the objective signal alone: 0.7 · exp(mean logprob) + 0.3 · heuristics
    expected = score_answer(PLAIN, None, mean_logprob=float(np.mean(SURE)))
    assert out.confidence.composite == pytest.approx(expected.composite) and expected.composite >= 0.8


async def test_without_logprobs_the_same_plain_answer_is_retried():
    s1 = ScriptedLLM(meta=fok("PARTIAL", 0.5)).say(PLAIN, PLAIN)
    out = await loop_before_escalate(s1, ScriptedLLM(model="scripted-2", configured=False), MESSAGES,
                                     focus=FOCUS, threshold=0.8)
    assert sorted(c.purpose for c in s1.calls) == ["metacognition_fok", "system1_answer", "system1_retry"]
    assert out.retried and out.confidence_before < 0.8


async def test_a_first_answer_with_logprobs_does_not_use_the_fok_already_asked():
    s1 = ScriptedLLM(meta=fok("UNKNOWN", 0.1)).say(result(PLAIN, logprobs=SURE))   # support not known yet
    out = await loop_before_escalate(s1, ScriptedLLM(model="scripted-2"), MESSAGES, focus=FOCUS, threshold=0.8)
    assert len(s1.of("meta_call_structured")) == 1
    assert out.fok == FeelingOfKnowing.unavailable(BY_LOGPROBS)
    assert not out.triggers.novelty_fok_unknown and out.path == "system1"


# --- the Confidence line as small models write it -------------------------------------------------

@pytest.mark.parametrize(("reply", "stated"), [
    ("Lisbon.\nConfidence: 0.9", 0.9),
    ("Lisbon.\n\n**Confidence:** 85%", 0.85),
    ("Lisbon. Confidence: 0.7", 0.7),
    ("Lisbon.\nConfidence level - high", 0.8),
    ("Lisbon.\n(confidence = 8/10)", 0.8),
    ("Confidence: 0.6\nLisbon.", 0.6),
    ("Lisbon.\n> *Confidence*: medium", 0.5),
    ("Lisbon.\nConfidence \u2013 very low", 0.1),
])
def test_the_confidence_line_is_read_and_stripped_in_the_forms_small_models_write(reply, stated):
    assert verbalized_confidence(reply) == pytest.approx(stated)
    assert strip_verbalized_confidence(reply) == "Lisbon."


def test_a_sentence_about_confidence_is_not_stripped():
    assert strip_verbalized_confidence("I have confidence: high hopes for Lisbon.") == (
        "I have confidence: high hopes for Lisbon.")
    assert strip_verbalized_confidence("My confidence: high.") == "My confidence: high."
