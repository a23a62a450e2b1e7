"""The mind's reply gives way to the user's words at the exit gate (issue 38 item 3): a reply
that only restates the user's statement is not a second memory, and one the user's statement
contradicts is dropped, the user's statement untouched."""

from __future__ import annotations

import random

from src.gates.memory_gate import Gates
from src.gates.mind_replies import yields_to_user
from src.weights.safety import Safety
from tests.fakes import HashEmbedder
from tests.gate_fakes import ScriptedMetaLLM, gate_settings
from tests.test_gate_user_statements import _decisions, _mature_store

SISTER = "My sister Maren lives in Gdansk, near the old harbour."


async def _gates(pool) -> Gates:
    return Gates.build(pool, HashEmbedder(), ScriptedMetaLLM(configured=False), gate_settings(noise_floor=0.0),
                       Safety(), rng=random.Random(3))


async def test_a_reply_that_restates_the_users_statement_is_not_kept_beside_it(pool):
    await _mature_store(pool)
    gates = await _gates(pool)
    await gates.admit(SISTER, exchange=False)
    await gates.exit.flush(reason="test")
    await gates.admit("Your sister Maren lives in Gdansk, near the old harbour.", source_tag="internal_self",
                      exchange=False)
    await gates.admit("I have never been to Gdansk, but the harbour cranes there sound worth a visit.",
                      source_tag="internal_self", exchange=False)
    await gates.exit.flush(reason="test")
    decided = await _decisions(pool)
    assert decided["Your sister Maren lives in Gdansk, near the old harbour."][1] == "drop"
    stored = {r["content"] for r in await pool.fetch("SELECT content FROM memories WHERE source_tag = 'internal_self'")}
    assert "Your sister Maren lives in Gdansk, near the old harbour." not in stored
    reasons = [r["reason"] for r in await pool.fetch("SELECT reason FROM gate_decisions WHERE gate = 'exit'")]
    assert any("restates the user's own statement" in r for r in reasons)


async def test_a_reply_the_users_statement_contradicts_is_dropped_and_the_statement_keeps_its_weight(pool):
    await _mature_store(pool)
    gates = await _gates(pool)
    await gates.admit("I work as a radiographer at the animal hospital in Bristol.", exchange=False)
    await gates.exit.flush(reason="test")
    before = await pool.fetchrow("SELECT id, depth_weight_alpha, depth_weight_beta FROM memories "
                                 "WHERE content LIKE 'I work as a radiographer%'")
    await gates.admit("You do not work as a radiographer at the animal hospital in Bristol.",
                      source_tag="internal_self", exchange=False)
    await gates.exit.flush(reason="test")
    after = await pool.fetchrow("SELECT depth_weight_alpha, depth_weight_beta FROM memories WHERE id = $1",
                                before["id"])
    assert (after["depth_weight_alpha"], after["depth_weight_beta"]) == (before["depth_weight_alpha"],
                                                                         before["depth_weight_beta"])
    row = await pool.fetchrow("SELECT action, reason FROM gate_decisions WHERE gate = 'exit' "
                              "AND content_preview LIKE 'You do not work%'")
    assert row["action"] == "drop" and "the user's words stand" in row["reason"], row["reason"]


def test_what_the_mind_adds_in_its_own_words_is_judged_as_before():
    from src.gates.evaluation import Neighbour

    class E:                                   # the parts of an Evaluation the rule reads
        novelty, decided_by, verdicts = "novel", None, []
        nearest = Neighbour(0.9, SISTER, memory_id=1, users=True)

        class item:
            content = "Gdansk has a famous crane by the harbour; have you seen it?"

    assert yields_to_user(E()) is None
    E.item.content = "Your sister Maren lives in Gdansk near the old harbour."
    assert yields_to_user(E()) is not None
    E.nearest = Neighbour(0.9, SISTER, memory_id=1, users=False)      # not the user's line
    assert yields_to_user(E()) is None


async def test_a_reply_that_only_says_the_mind_does_not_know_is_not_kept(pool):
    """Run G stored "I'm sorry, but I don't know any information about your dog.", and it came
    first by full text and by vector for the next question about the dog. An absence is no
    memory; a reply that knows something beside it, or asks something, is judged as before."""
    await _mature_store(pool)
    gates = await _gates(pool)
    await gates.admit("My dog is a three-legged greyhound called Pepper.", exchange=False)
    await gates.exit.flush(reason="test")
    for reply in ["I'm sorry, but I don't know any information about your dog.",
                  "I don't know what your dog eats. Could you tell me?",
                  "I cannot recall his age. Greyhounds often race until they are four or five years old.",
                  "Does Pepper like long walks on the beach near the harbour?"]:
        await gates.admit(reply, source_tag="internal_self", exchange=False)
    await gates.exit.flush(reason="test")
    decided = await _decisions(pool)
    reasons = {r["content_preview"]: r["reason"] for r in await pool.fetch(
        "SELECT content_preview, reason FROM gate_decisions WHERE gate = 'exit'")}
    for absent in ["I'm sorry, but I don't know any information about your dog.",
                   "I don't know what your dog eats. Could you tell me?"]:
        assert decided[absent][1] == "drop"
        assert any(p in absent and "does not know" in r for p, r in reasons.items())
    for judged in ["I cannot recall his age. Greyhounds often race until they are four or five years old.",
                   "Does Pepper like long walks on the beach near the harbour?"]:
        assert not any(p in judged and "does not know" in r for p, r in reasons.items())
