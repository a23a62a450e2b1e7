"""The user's own lines at the exit gate (issue 22): statements that carry information are
kept in a store of any maturity, chatter is dropped, questions are not stored as facts,
and relevance is judged in the focus the item was said in, not the focus at flush time."""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from src.gates.memory_gate import Gates
from src.gates.scratch import clean_expired
from src.gates.utterance import classify
from src.providers.embedding import embed_memories
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.fakes import HashEmbedder
from tests.gate_fakes import ScriptedMetaLLM, attention_for, gate_settings

UTTERANCES = Path(__file__).resolve().parents[1] / "bench" / "data" / "utterances.jsonl"
FACTS = ["My daughter Ada starts school in September.", "I am allergic to penicillin.",
         "my dog is called pepper", "ok so my flight is at 6am tomorrow",
         "I moved to Leeds last month, did I tell you?",
         "My son Theo turns 7 on Saturday — any party ideas?"]
CHATTER = ["thanks a lot!", "haha nice", "good morning :)", "cool cool cool"]
QUESTIONS = ["what do I keep?", "what's my sister's name?", "can you remind me when my flight is?"]


async def _mature_store(pool, n: int = 1200) -> None:
    # other people's chat: the store is past `agent.maturity_memories`, no bootstrap floor
    await pool.execute("INSERT INTO memories (content) SELECT 'someone else said thing ' || i "
                       "FROM generate_series(1, $1) i", n)


async def _gates(pool, *, noise_floor: float = 0.0, seed: int = 4) -> Gates:
    return Gates.build(pool, HashEmbedder(), ScriptedMetaLLM(configured=False), gate_settings(noise_floor=noise_floor),
                       Safety(), rng=random.Random(seed))


async def _decisions(pool) -> dict[str, tuple[str, str, str]]:
    rows = await pool.fetch("SELECT content_preview, cell_relevance, action, details FROM gate_decisions "
                            "WHERE gate = 'exit' ORDER BY id")
    return {r["content_preview"]: (r["cell_relevance"], r["action"], json.loads(r["details"])["utterance"])
            for r in rows}


async def test_a_mature_mind_keeps_what_the_user_states_and_not_chatter_or_questions(pool):
    await _mature_store(pool)
    gates = await _gates(pool)
    for text in FACTS + CHATTER + QUESTIONS:
        await gates.admit(text, exchange=False)
    report = await gates.exit.flush(reason="test")
    decided = await _decisions(pool)
    assert {t: decided[t] for t in FACTS} == {t: ("core", "persist", "statement") for t in FACTS}
    kept_chatter = [t for t in CHATTER if t in decided]        # the entry gate may skip short ones
    assert {decided[t] for t in kept_chatter} <= {("irrelevant", "drop", "chatter")}
    assert {t: decided[t] for t in QUESTIONS} == {t: ("irrelevant", "drop", "question") for t in QUESTIONS}
    assert report.actions["persist"] == len(FACTS)
    stored = {r["content"] for r in await pool.fetch("SELECT content FROM memories WHERE source_tag = 'external_user'"
                                                     " AND metadata ? 'scratch_id'")}
    assert stored == set(FACTS)


async def test_the_noise_floor_never_stores_a_question_and_rarely_keeps_chatter(pool):
    """Noise flips chatter's drop to persist at the floor's rate; a question never."""
    await _mature_store(pool)
    gates = await _gates(pool, noise_floor=0.3, seed=11)
    reactions = ["haha", "lol", "okay", "nice", "cool", "thanks", "yay", "wow"]
    chatter = [" ".join(p) + "!" for p in itertools.permutations(reactions, 3)][:120]
    for text in chatter:
        await gates.admit(text, exchange=False)
    places = ["box", "shed", "attic", "drawer", "garage", "cellar", "van", "locker"]
    for i in range(40):
        await gates.admit(f"what do I keep in the {places[i % 8]}?{' ' * (i // 8)}", exchange=False)
    await gates.exit.flush(reason="test")
    rows = await pool.fetch("SELECT action, details->>'utterance' AS kind FROM gate_decisions WHERE gate = 'exit'")
    by_kind = Counter((r["kind"], r["action"]) for r in rows)
    assert by_kind[("question", "drop")] == 40 and by_kind[("question", "persist")] == 0
    chatter_rows = sum(n for (k, _), n in by_kind.items() if k == "chatter")
    flipped = by_kind[("chatter", "persist")] / chatter_rows
    # Binomial(120, 0.3): mean 0.3, sd 0.042; a fixed seed, a check of the rate itself
    assert chatter_rows == 120 and 0.18 < flipped < 0.42


async def test_relevance_is_judged_in_the_focus_the_item_was_said_in(pool):
    """An internal item (no statement rule) attended under its own focus is core even though
    the focus at flush time is elsewhere; an item with no noted focus falls back to its window."""
    await _mature_store(pool)
    gates = await _gates(pool)
    texts = ["The harbour lights flicker over the water tonight", "Quarterly tax forms are due in April"]
    vecs = await embed_memories(HashEmbedder(), texts, ["episodic"] * 2)
    noted = await gates.admit(texts[0], source_tag="internal_dmn", exchange=False)
    await gates.note_focus([noted.scratch_id], vecs[:1])     # the cycle that attended to it
    await gates.admit(texts[1], source_tag="internal_dmn", exchange=False)   # attended to under no focus
    await gates.exit.flush(reason="test")
    rows = {r["content_preview"]: r for r in await pool.fetch(
        "SELECT content_preview, s_i, cell_relevance FROM gate_decisions WHERE gate = 'exit'")}
    assert rows[texts[0]]["s_i"] == pytest.approx(1.0, abs=0.05) and rows[texts[0]]["cell_relevance"] == "core"
    assert rows[texts[1]]["s_i"] < 0.6


async def test_a_close_neighbour_that_says_less_is_not_confirmed_by_a_new_fact(pool):
    """Similar embedding, new words: the new fact persists instead of reinforcing the old one."""
    embedder = HashEmbedder()
    [old] = await MemoryStore(pool, embedder).store_many(
        [NewMemory("My sister Mara moved to Leeds in May for a nursing job")])
    gates = Gates.build(pool, embedder, ScriptedMetaLLM(verdict=lambda a, b: False), gate_settings(noise_floor=0.0),
                        Safety(), rng=random.Random(4))      # the micro-call says "not opposed"
    await gates.admit("My sister Mara moved to Leeds in May for a nursing job with the NHS", exchange=False)
    await gates.admit("My sister Mara moved to Leeds in May for a nursing job.", exchange=False)
    await gates.exit.flush(reason="test")
    rows = await pool.fetch("SELECT cell_novelty, action, memory_id, reason FROM gate_decisions "
                            "WHERE gate = 'exit' ORDER BY id")
    assert [(r["cell_novelty"], r["action"]) for r in rows] == [("novel", "persist"), ("confirming", "reinforce")]
    assert "says what the nearest memory does not (nhs) -> novel" in rows[0]["reason"]
    assert rows[1]["memory_id"] == old


def test_the_labelled_set_meets_the_issue_on_its_report_half():
    """bench/data/utterances.jsonl (written apart from the classifier): facts kept >= 98%,
    chatter not kept >= 60%, on the half the word lists were not adjusted on."""
    rows = [json.loads(line) for line in UTTERANCES.read_text(encoding="utf-8").splitlines() if line.strip()]
    report = [r for r in rows if r["split"] == "report"]
    assert len(rows) >= 200
    kept = Counter((r["label"], classify(r["text"]).kind == "statement") for r in report)
    facts = kept[("fact", True)] / (kept[("fact", True)] + kept[("fact", False)])
    chatter_dropped = kept[("chatter", False)] / (kept[("chatter", True)] + kept[("chatter", False)])
    assert facts >= 0.98 and chatter_dropped >= 0.60


def test_classify_reads_kinds_of_lines():
    assert [classify(t).kind for t in FACTS] == ["statement"] * len(FACTS)
    assert [classify(t).kind for t in ("ok", "thanks!", "lol", "good morning :)", "👍")] == ["chatter"] * 5
    assert [classify(t).kind for t in QUESTIONS] == ["question"] * len(QUESTIONS)
    # a question rich in the user's own world is kept (the permissive side)
    assert classify("Should I tell my boss Karen that I'm quitting?").kind == "statement"
    assert classify("Remember that my locker code is 4471.").kind == "statement"
    assert classify("Mein Bruder heißt Jonas.").kind == "statement"       # unknown words count
    assert classify("what do I keep?").content_words == frozenset({"keep"})
    assert np.isfinite(len(classify("").reason)) and classify("").kind == "chatter"


async def test_nothing_the_user_said_expires_unseen_from_the_buffer(pool):
    """Past its TTL an unflushed row is kept until the exit gate has seen it; a row the
    gate left in the buffer cell is persisted once its TTL has passed."""
    gates = Gates.build(pool, HashEmbedder(), ScriptedMetaLLM(configured=False),
                        gate_settings(noise_floor=0.0, statement_sources=[], persist_tau=None), Safety(),
                        rng=random.Random(2))
    row = await gates.admit("The harbour ferry timetable changes next week", source_tag="internal_dmn",
                            exchange=False)
    await pool.execute("UPDATE scratch_buffer SET expires_at = now() - interval '1 hour' WHERE id = $1",
                       row.scratch_id)
    assert await clean_expired(pool) == 0                        # unseen: never deleted
    vec = await embed_memories(HashEmbedder(), ["The harbour ferry timetable changes next week"], ["episodic"])
    await gates.note_focus([row.scratch_id], attention_for(vec, [0.4]))   # said in a peripheral focus: buffer cell
    await gates.exit.flush(reason="test")
    decided = await pool.fetchrow("SELECT cell_action, action, reason FROM gate_decisions WHERE gate = 'exit'")
    assert (decided["cell_action"], decided["action"]) == ("buffer", "persist")
    assert decided["reason"].endswith("undecided for too long (its TTL has passed) -> persist")
    assert await pool.fetchval("SELECT flushed_at IS NOT NULL FROM scratch_buffer WHERE id = $1", row.scratch_id)
    assert await clean_expired(pool) == 1                        # seen, decided, past its TTL: cleaned
