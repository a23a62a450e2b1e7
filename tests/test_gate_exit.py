"""The exit gate (plan §2.8) against a real database: the plan's ten messages, the noise
floor in every cell, the bootstrap floor, and what is written for each decision."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass, field

import numpy as np
import pytest

from src.gates.contradiction import ContradictionAnswer
from src.gates.matrix import NOISE_ALTERNATIVE
from src.gates.memory_gate import Gates
from src.providers.embedding import embed_memories
from src.providers.resilience import current_shared_retries
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.fakes import HashEmbedder
from tests.gate_fakes import ScriptedMetaLLM, attention_for, gate_settings

STORED = [
    "Fresh espresso tastes best before nine",
    "The corner bakery sells sourdough bread",
    "Our team meets every Tuesday afternoon",
    "The office coffee machine is fast",
    "The train to Berlin leaves at noon",
    "The public library opens on Sundays",
]
CORE, PERIPHERAL, IRRELEVANT = 0.65, 0.4, 0.25
#: Relevance is S_i (or the floor) alone: no charge bonus, no lift by ACT-R's τ.
S_I_ALONE = {"charge_bonus": 0.0, "persist_tau": None}
# (message, S_i the attention focus gives it, relevance, novelty, action, contradiction layer)
TEN = [
    ("Fresh espresso tastes best before nine!", CORE, "core", "confirming", "reinforce", "embedding"),
    ("I started learning to bake croissants", CORE, "core", "novel", "persist", "none"),
    ("The corner bakery does not sell sourdough bread", CORE, "core", "contradicting", "persist_flag", "negation"),
    ("Our team meets every Tuesday afternoon.", PERIPHERAL, "peripheral", "confirming", "skip", "embedding"),
    ("My neighbour adopted a grey kitten", PERIPHERAL, "peripheral", "novel", "buffer", "none"),
    ("The office coffee machine is slow", PERIPHERAL, "peripheral", "contradicting", "persist", "llm"),
    ("The train to Berlin leaves at noon.", IRRELEVANT, "irrelevant", "confirming", "drop", "embedding"),
    ("Quarterly tax forms are due in April", IRRELEVANT, "irrelevant", "novel", "drop", "none"),
    ("The public library does not open on Sundays", IRRELEVANT, "irrelevant", "contradicting", "drop", "negation"),
    # said twice in one flush: confirms the memory item 2 just became
    ("I started learning to bake croissants.", CORE, "core", "confirming", "reinforce", "embedding"),
]


async def _setup(pool, *, noise_floor: float, llm=None, seed: int = 5):
    embedder = HashEmbedder()
    stored_ids = await MemoryStore(pool, embedder).store_many([NewMemory(t) for t in STORED])
    # the matrix itself, on S_i alone: the user's statements are not classified here
    # (their own rule is tested in tests/test_gate_user_statements.py), and neither the
    # charge's bonus nor τ raise a row (tests/test_gate_uses_charge_and_activation.py)
    settings = gate_settings(noise_floor=noise_floor, bootstrap_floor=0.0, statement_sources=[], **S_I_ALONE)
    llm = llm or ScriptedMetaLLM(verdict=lambda a, b: True)
    gates = Gates.build(pool, embedder, llm, settings, Safety(), rng=random.Random(seed))
    scratch_ids = []
    for text, *_ in TEN:
        admitted = await gates.admit(text, exchange=False)
        assert admitted.decision.rule == "content" and admitted.scratch_id is not None
        scratch_ids.append(admitted.scratch_id)
    vecs = await embed_memories(HashEmbedder(), [t for t, *_ in TEN], ["episodic"] * len(TEN))
    # the focus the ten were said in (the loop notes it in the cycle that attends to them)
    await gates.note_focus(scratch_ids, attention_for(vecs, [s for _, s, *_ in TEN]))
    return gates, llm, embedder, dict(zip(STORED, stored_ids, strict=True))


async def _exit_rows(pool):
    return await pool.fetch(
        """SELECT scratch_id, memory_id, content_preview, cell_relevance, cell_novelty, s_i,
                  relevance, bootstrap_floor, novelty_similarity, nearest_memory_id,
                  contradiction_layer, cell_action, action, random_draw, noise_rate, noise_fired,
                  round, embed_model, reason, details
             FROM gate_decisions WHERE gate = 'exit' ORDER BY scratch_id, round""")


async def test_the_ten_messages_land_in_their_cells(pool):
    gates, llm, embedder, stored = await _setup(pool, noise_floor=0.0)
    report = await gates.exit.flush(reason="test")

    assert (report.evaluated, report.llm_calls, report.claimed_elsewhere) == (10, 1, 0)
    assert report.actions == {"reinforce": 2, "persist": 2, "persist_flag": 1, "skip": 1,
                              "buffer": 1, "drop": 3}
    rows = await _exit_rows(pool)
    got = [(r["content_preview"], r["cell_relevance"], r["cell_novelty"], r["cell_action"],
            r["action"], r["contradiction_layer"]) for r in rows]
    assert got == [(t, rel, nov, act, act, layer) for t, _, rel, nov, act, layer in TEN]
    assert [r["s_i"] for r in rows] == pytest.approx([s for _, s, *_ in TEN], abs=1e-5)
    assert [r["relevance"] for r in rows] == pytest.approx([s for _, s, *_ in TEN], abs=1e-5)
    assert {r["bootstrap_floor"] for r in rows} == {0.0}
    assert {(r["noise_rate"], r["noise_fired"], r["round"], r["embed_model"]) for r in rows} == {
        (0.0, False, 1, "fake-hash-768")}
    assert all(0.0 <= r["random_draw"] < 1.0 for r in rows)

    # the one pair layers 1 and 2 left open went to the isolated micro-call, and only it
    [call] = llm.calls
    assert call.statements == ("The office coffee machine is slow", "The office coffee machine is fast")
    assert (call.schema, call.purpose, call.max_tokens) == (ContradictionAnswer, "gate_contradiction", 120)
    assert call.question.endswith("Does A contradict B? Answer YES or NO as `contradicts` (true = YES). "
                                  "Also give `summary_a`: statement A as one line of at most 15 words.")

    memories = {r["content"]: r for r in await pool.fetch(
        "SELECT id, content, compressed, source_tag, event_time, embed_model, metadata, "
        "depth_weight_alpha, depth_weight_beta FROM memories WHERE id > $1", max(stored.values()))}
    assert sorted(memories) == sorted(["I started learning to bake croissants",
                                       "The corner bakery does not sell sourdough bread",
                                       "The office coffee machine is slow"])
    croissants = memories["I started learning to bake croissants"]
    flagged = memories["The corner bakery does not sell sourdough bread"]
    slow = memories["The office coffee machine is slow"]
    # compressed: from the micro-call where one was made, the deterministic fallback otherwise
    assert slow["compressed"] == "summary: The office coffee machine is slow"
    assert croissants["compressed"] == "I started learning to bake croissants"
    meta = json.loads(flagged["metadata"])
    assert (meta["flag"], meta["contradicts"], meta["contradiction_layer"], meta["gate_cell"],
            meta["priority"]) == ("contradiction", stored["The corner bakery sells sourdough bread"],
                                  "negation", "core/contradicting", "max")
    assert json.loads(slow["metadata"])["gate_cell"] == "peripheral/contradicting"
    assert {(m["source_tag"], m["embed_model"], m["depth_weight_beta"]) for m in memories.values()} == {
        ("external_user", "fake-hash-768", 4.0)}
    assert (flagged["depth_weight_alpha"], slow["depth_weight_alpha"]) == (1.0, 1.0)

    # decisions name the memory they wrote or touched
    by_text = {r["content_preview"]: r for r in rows}
    assert by_text["I started learning to bake croissants"]["memory_id"] == croissants["id"]
    assert by_text["Fresh espresso tastes best before nine!"]["memory_id"] == stored[STORED[0]]
    assert by_text["I started learning to bake croissants."]["memory_id"] == croissants["id"]
    assert by_text["I started learning to bake croissants."]["nearest_memory_id"] == croissants["id"]
    assert by_text["My neighbour adopted a grey kitten"]["memory_id"] is None

    # weight changes went through the choke point, and its audit says so
    audit = await pool.fetch("SELECT memory_id, operation, actor, requested_delta, applied_delta, "
                             "alpha_after, beta_after - beta_before AS d_beta FROM consolidation_log ORDER BY id")
    assert [(a["memory_id"], a["operation"], a["actor"], a["requested_delta"]) for a in audit] == [
        (stored[STORED[0]], "reinforce", "exit_gate", 0.5),
        (stored["The corner bakery sells sourdough bread"], "contradict", "exit_gate", 0.5),
        (croissants["id"], "reinforce", "exit_gate", 0.5)]
    assert audit[1]["d_beta"] == 0.5
    # the new memory was inserted at Beta(1, 4) and then reinforced in the same transaction
    assert croissants["depth_weight_alpha"] == audit[2]["alpha_after"] == 1.0 + audit[2]["applied_delta"]

    # the buffer cell keeps its row for the next flush; every other row is flushed
    scratch = {r["content"]: r for r in await pool.fetch("SELECT content, flushed_at, metadata FROM scratch_buffer")}
    assert [t for t, r in scratch.items() if r["flushed_at"] is None] == ["My neighbour adopted a grey kitten"]
    assert json.loads(scratch["My neighbour adopted a grey kitten"]["metadata"]) == {"gate_rounds": 1}


async def test_a_buffered_item_comes_back_and_is_persisted_after_its_last_round(pool):
    gates, llm, embedder, stored = await _setup(pool, noise_floor=0.0)
    await gates.exit.flush(reason="first")
    for expected_round in (2, 3):
        report = await gates.exit.flush(reason=f"round {expected_round}")
        assert report.evaluated == 1
    rows = [r for r in await _exit_rows(pool) if r["content_preview"] == "My neighbour adopted a grey kitten"]
    assert [(r["round"], r["cell_action"], r["action"]) for r in rows] == [
        (1, "buffer", "buffer"), (2, "buffer", "buffer"), (3, "buffer", "persist")]
    assert rows[-1]["reason"] == ("peripheral x novel -> buffer; undecided for too long "
                                  "(round 3 of 3) -> persist")
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE content = $1",
                               "My neighbour adopted a grey kitten") == 1
    assert await pool.fetchval("SELECT count(*) FROM scratch_buffer WHERE flushed_at IS NULL") == 0


async def test_the_noise_floor_takes_the_alternative_in_every_cell(pool):
    gates, llm, embedder, stored = await _setup(pool, noise_floor=1.0)
    report = await gates.exit.flush(reason="test")
    rows = await _exit_rows(pool)
    assert [(r["cell_action"], r["action"], r["noise_fired"]) for r in rows] == [
        (act, NOISE_ALTERNATIVE[act], True) for _, _, _, _, act, _ in TEN]
    # drop cells persist under noise: nothing the gate keeps by chance is ever destroyed
    assert report.actions == {"persist": 7, "buffer": 3}
    assert rows[6]["reason"] == ("irrelevant x confirming -> drop; noise floor fired "
                                 f"(draw {rows[6]['random_draw']:.4f} < 1.000) -> persist")


async def test_reflex_mode_skips_layer_three_and_keeps_the_item(pool, caplog):
    reflex = ScriptedMetaLLM(configured=False)
    gates, llm, embedder, stored = await _setup(pool, noise_floor=0.0, llm=reflex)
    with caplog.at_level("INFO", logger="src.gates.contradiction"):
        report = await gates.exit.flush(reason="test")
    assert reflex.calls == [] and report.llm_calls == 0
    row = next(r for r in await _exit_rows(pool) if r["content_preview"] == "The office coffee machine is slow")
    # undecided opposition: no claim either way, so the related item is kept as novel
    assert (row["contradiction_layer"], row["cell_novelty"], row["action"]) == ("llm_skipped", "novel", "buffer")
    assert "contradiction layer 3 skipped: no language model is configured" in caplog.messages


async def test_a_failing_micro_call_leaves_the_pair_undecided(pool):
    failing = ScriptedMetaLLM(fail=True)
    gates, llm, embedder, stored = await _setup(pool, noise_floor=0.0, llm=failing)
    report = await gates.exit.flush(reason="test")
    assert (len(failing.calls), report.llm_calls) == (1, 0)
    row = next(r for r in await _exit_rows(pool) if r["content_preview"] == "The office coffee machine is slow")
    assert (row["contradiction_layer"], row["cell_novelty"]) == ("llm_failed", "novel")


async def test_the_micro_call_can_say_no(pool):
    gates, llm, embedder, stored = await _setup(pool, noise_floor=0.0,
                                                llm=ScriptedMetaLLM(verdict=lambda a, b: False))
    await gates.exit.flush(reason="test")
    row = next(r for r in await _exit_rows(pool) if r["content_preview"] == "The office coffee machine is slow")
    # "not a contradiction" at similarity 0.89 > 0.85, but it says what the memory does not
    # ("slow"): novel, not a confirmation folded into "fast"
    assert (row["contradiction_layer"], row["cell_novelty"], row["action"]) == ("llm", "novel", "buffer")
    assert "says what the nearest memory does not (slow) -> novel" in row["reason"]
    assert json.loads(row["details"])["contradicts"] is False
    assert row["novelty_similarity"] == pytest.approx(0.895, abs=0.001)


async def _buffer_user_messages(pool, texts, *, source_tag="external_user", settings=None, seed=3):
    embedder = HashEmbedder()
    gates = Gates.build(pool, embedder, ScriptedMetaLLM(configured=False), settings or gate_settings(),
                        Safety(), rng=random.Random(seed))
    for text in texts:
        await gates.admit(text, source_tag=source_tag, exchange=False)
    return gates


async def test_bootstrap_a_newborn_mind_keeps_what_the_user_says(pool):
    # no identity, no goals, no memories, no attention focus: S_i has nothing to spread from
    texts = ["My name is Ada and I live in Lisbon", "I work as a marine biologist",
             "My favourite food is grilled sardines"]
    # the floor alone (statements of the user are core by their own rule, tested apart)
    gates = await _buffer_user_messages(pool, texts, settings=gate_settings(noise_floor=0.0, statement_sources=[],
                                                                            **S_I_ALONE))
    await gates.admit("Idle thought about the colour of the sea", source_tag="dmn", exchange=False)
    await gates.exit.flush(reason="test")
    rows = await _exit_rows(pool)
    assert [(r["content_preview"], r["bootstrap_floor"], r["cell_relevance"], r["action"]) for r in rows] == [
        (texts[0], 0.65, "core", "persist"), (texts[1], 0.65, "core", "persist"),
        (texts[2], 0.65, "core", "persist"),
        # only the user's input gets the floor; the mind's own idle thought is judged on S_i
        ("Idle thought about the colour of the sea", 0.0, "irrelevant", "drop")]
    # the floor, not S_i (similarity to the rest of the flush), put the user's items in core
    assert [r["relevance"] for r in rows[:3]] == [0.65] * 3
    assert all(r["s_i"] < 0.6 for r in rows) and rows[3]["s_i"] < 0.3
    assert await pool.fetchval("SELECT count(*) FROM memories") == 3


@pytest.mark.parametrize(("memories", "floor", "relevance", "action"), [
    (70, 0.65 * (1 - 0.070), "core", "persist"),
    (500, 0.325, "peripheral", "buffer"),
    (1000, 0.0, "irrelevant", "drop"),
])
async def test_the_bootstrap_floor_fades_with_maturity(pool, memories, floor, relevance, action):
    await pool.execute("INSERT INTO memories (content) SELECT 'memory ' || i FROM generate_series(1, $1) i",
                       memories)
    gates = await _buffer_user_messages(pool, ["A single message with nothing around it"],
                                        settings=gate_settings(noise_floor=0.0, statement_sources=[]))
    await gates.exit.flush(reason="test")
    [row] = await _exit_rows(pool)
    # alone in its flush and with no embedded memories, S_i is 0: the floor is the relevance
    assert row["s_i"] == 0.0
    assert row["bootstrap_floor"] == pytest.approx(floor)
    assert (row["cell_relevance"], row["action"]) == (relevance, action)
    assert json.loads(row["details"])["maturity"] == pytest.approx(min(1.0, memories / 1000))


async def test_without_a_focus_the_flush_and_recent_memories_stand_in(pool):
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store(NewMemory("sardines grilled on the beach in Lisbon"))
    gates = await _buffer_user_messages(pool, ["grilled sardines on the beach in Lisbon tonight",
                                               "an unrelated remark about tax forms and April"],
                                        source_tag="tool", settings=gate_settings(noise_floor=0.0))
    await gates.exit.flush(reason="test")
    rows = await _exit_rows(pool)
    vecs = await embed_memories(embedder, ["grilled sardines on the beach in Lisbon tonight",
                                           "an unrelated remark about tax forms and April",
                                           "sardines grilled on the beach in Lisbon"], ["episodic"] * 3)
    sims = np.clip(vecs @ vecs.T, 0, 1)
    # mean similarity to the other item of the flush and the most recent memory
    assert [r["s_i"] for r in rows] == pytest.approx([(sims[0, 1] + sims[0, 2]) / 2,
                                                      (sims[1, 0] + sims[1, 2]) / 2], abs=1e-5)


async def test_emotional_charge_is_zero_on_an_empty_store_and_recorded(pool):
    gates = await _buffer_user_messages(pool, ["The first thing I ever said to you"],
                                        settings=gate_settings(noise_floor=0.0))
    await gates.exit.flush(reason="test")
    [row] = await pool.fetch("SELECT emotional_charge FROM gate_decisions WHERE gate = 'exit'")
    assert row["emotional_charge"] == 0.0
    [memory] = await pool.fetch("SELECT metadata FROM memories")
    assert json.loads(memory["metadata"])["emotional_charge"] == 0.0


@dataclass
class SlowMetaLLM(ScriptedMetaLLM):
    """Answers after a pause, noting how many calls were in flight at once."""

    in_flight: int = 0
    most: int = 0
    budgets: list = field(default_factory=list)

    async def meta_call_structured(self, question, schema, *, purpose, max_tokens=None, caller=None):
        self.budgets.append(current_shared_retries())
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        await asyncio.sleep(0.01)
        try:
            return await super().meta_call_structured(question, schema, purpose=purpose,
                                                      max_tokens=max_tokens)
        finally:
            self.in_flight -= 1


async def test_micro_calls_are_bounded_in_flight(pool):
    subjects = ["office coffee machine", "hallway printer", "shared laptop", "lab centrifuge",
                "kitchen kettle", "garage door motor"]
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many([NewMemory(f"The {s} is fast") for s in subjects])
    llm = SlowMetaLLM(verdict=lambda a, b: True)
    # one screened pair per statement; the relation questions about the other subjects' lines
    # (tests/test_gate_updates.py) would only add calls to count
    gates = Gates.build(pool, embedder, llm, gate_settings(noise_floor=0.0, llm_concurrency=2, relation_pairs=0),
                        Safety(), rng=random.Random(0))
    for s in subjects:
        await gates.admit(f"The {s} is slow", exchange=False)
    report = await gates.exit.flush(reason="test")
    asked = await pool.fetchval("SELECT count(*) FROM gate_decisions WHERE contradiction_layer = 'llm'")
    assert report.llm_calls == len(llm.calls) == asked == 6
    assert llm.most == 2
    # the six calls of one flush share one retry budget (issue 11, Deliver 6)
    assert len({id(b) for b in llm.budgets}) == 1 and llm.budgets[0].left == 3
    assert current_shared_retries() is None


async def test_the_llms_compressed_line_is_cleaned_like_every_stored_field(pool):
    # a micro-call summary with a NUL byte, a decomposed accent and trailing blanks
    llm = ScriptedMetaLLM(verdict=lambda a, b: True, summary=lambda a: "sum\x00mary of cafe\u0301 A  \n")
    gates, _, _, stored = await _setup(pool, noise_floor=0.0, llm=llm)
    await gates.exit.flush(reason="test")
    slow = await pool.fetchval("SELECT compressed FROM memories WHERE content = $1",
                               "The office coffee machine is slow")
    assert slow == "summary of caf\u00e9 A"      # NUL gone, NFC, trimmed
