"""Issue 27 item 5: internal text stays internal.

Failure and reflex notices are said to the user and nothing else: never a memory, never in
the conversation window (a small model, shown one in its window, answered a DMN thought with
a copy of it at confidence 0.92, and the copy was spoken). A thought of the mind's own enters
the window framed as a thought, its answer marked as one unless it was said; and it is said
to the user unprompted only past the bar of `loop.unprompted`: confident, never a failure
notice, not a repeat, something new.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from src.config import load_settings
from src.context.prompts import THOUGHT_MARK
from src.db.manifest import record_start
from src.loop.acting import unprompted_verdict
from src.loop.degraded import failure_note, is_failure_notice
from src.loop.outage import waiting_note
from src.loop.prompts import reflex_reply
from src.loop.settings import UnpromptedSettings
from src.mind import build_mind
from src.providers.costs import CostLedger
from src.providers.endpoint_gate import EndpointGates
from src.providers.settings import ProvidersSettings
from src.recall.store import MemoryStore, NewMemory
from tests.fakes import HashEmbedder
from tests.fakes_llm import ScriptedLLM

NOW = datetime(2026, 11, 25, 10, 0, tzinfo=UTC)
PRIYA = "Hi! My name is Priya Raman, I am a marine biologist at the Oceanário."
DEADLINE = "the language model did not answer within 20 s"


# --- what a failure notice is ----------------------------------------------------------------

@pytest.mark.parametrize("text", [
    reflex_reply(["something recalled"], because=DEADLINE),
    reflex_reply([], because="the language model failed: HTTP 400: context size exceeded"),
    reflex_reply([], because="the language model answered with a tool call instead of words, "
                             "even when asked to answer without tools"),
    reflex_reply(["a"], said="no language model is configured (no key)"),
    failure_note("hello", 3, "OSError: boom", kept=True),
    waiting_note(2),
    # a model's copy of one, without the brackets, inside an answer of its own
    "I cannot answer in words right now: the language model did not answer within 20 s.",
    "Sorry — the language model did not answer within 12 s, so here is what I recall.",
])
def test_every_notice_the_loop_says_when_it_cannot_answer_is_known_as_one(text):
    assert is_failure_notice(text)


@pytest.mark.parametrize("text", [
    "", None, "I cannot swim, but I can answer questions about the sea.",
    "The model of the ship did not sink.", "Reflexes of octopuses are fast."])
def test_ordinary_answers_are_not_failure_notices(text):
    assert not is_failure_notice(text)


# --- the bar for speaking unprompted ---------------------------------------------------------

BAR = UnpromptedSettings(repeat_overlap=0.6, min_new_words=2, recent_said=50)


@pytest.mark.parametrize(("answer", "failed", "said", "why"), [
    ("Octopuses can taste with their arms; Priya might like a paper on it.", False, True, "new (6 words"),
    ("(I cannot answer in words right now: x.)", True, False, "a failure notice is never said unprompted"),
    (f"I cannot answer in words right now: {DEADLINE}.", False, False, "a failure notice"),
    ("Priya Raman is a marine biologist at the Oceanário.", False, False, "a repeat (100% of its words"),
    ("Priya studies octopus behaviour.", False, False, "nothing new (1 word(s)"),
    ("", False, False, "nothing to say"),
])
def test_the_unprompted_bar(answer, failed, said, why):
    earlier = [PRIYA, "Nice to meet you, Priya. What do you study at the Oceanário?",
               "I study octopus tanks and their behaviour."]
    ok, reason = unprompted_verdict(answer, failed=failed, earlier=earlier,
                                    thought="This comes back to me: the Oceanário. Why does it matter now?",
                                    settings=BAR)
    assert ok is said and why in reason, reason


def test_the_bar_compares_with_the_thought_that_raised_it():
    thought = f"This comes back to me, from today: '{PRIYA}'. Why does it matter now?"
    ok, reason = unprompted_verdict("Priya Raman is a marine biologist.", failed=False, earlier=[],
                                    thought=thought, settings=BAR)
    assert not ok and "a repeat" in reason


# --- in the loop -----------------------------------------------------------------------------------

def _meta(question: str, schema: type) -> dict:
    if schema.__name__ == "FokAnswer":
        return {"judgement": "KNOWN", "confidence": 0.95}
    if schema.__name__ == "ContradictionAnswer":
        return {"contradicts": False, "summary_a": question.splitlines()[0][13:80]}
    if schema.__name__ == "RelationsAnswer":     # a user's statement and earlier ones (src/gates/updates.py)
        return {"updates": 0, "contradicts": [], "summary_a": question.splitlines()[0][13:80]}
    raise AssertionError(f"unexpected meta call {schema.__name__}")


async def _mind(pool, tmp_path, system1):
    settings = load_settings(tmp_path / "none.yaml", env={}, overrides={
        "gates": {"seed": 1, "exit": {"noise_floor": 0.0}},
        # the scripted answers' composite confidence is ~0.73: "confident" is this floor
        "loop": {"actions": {"internal_communicate_confidence": 0.6}},
        "layers": {"values_path": str(tmp_path / "v.json"), "goals_path": str(tmp_path / "g.json"),
                   "cache_dir": str(tmp_path / "cache")}})
    if system1.configured:
        system1.meta = _meta
    providers = SimpleNamespace(endpoints=EndpointGates(), embedder=HashEmbedder(), reranker=None, system1=system1,
                                system2=ScriptedLLM(configured=False), meta=system1,
                                ledger=CostLedger(pool, session_id="internal", prices=ProvidersSettings().prices))
    delivered: list[str] = []
    mind = await build_mind(settings, pool, providers, session_id="internal",
                            manifest=await record_start(pool, "internal", "fake-hash-768"),
                            deliver=delivered.append, rng=np.random.default_rng(3))
    return mind, delivered


async def _turn(mind, source: str, text: str, minute: int):
    await mind.loop.submit(source, text, now=NOW + timedelta(minutes=minute))
    return await mind.loop.cycle(NOW + timedelta(minutes=minute, seconds=10))


async def _kept_texts(pool) -> list[str]:
    """Every text the store keeps or will keep: memories and scratch rows (after a flush)."""
    rows = await pool.fetch("SELECT content FROM memories UNION ALL SELECT content FROM scratch_buffer")
    return [r["content"] for r in rows]


async def test_a_reflex_reply_is_said_but_never_kept_nor_in_the_window(pool, tmp_path):
    mind, delivered = await _mind(pool, tmp_path, ScriptedLLM(configured=False))
    await _turn(mind, "user", PRIYA, 0)
    await _turn(mind, "user", "What do you remember about me?", 1)
    assert len(delivered) == 2 and all(d.startswith("(reflex mode — ") for d in delivered)
    window = mind.loop.fifo.messages
    assert [m.role for m in window] == ["user", "user"]                 # the user's lines only
    assert not any(is_failure_notice(m.content) for m in window)
    await mind.gates.lifecycle.shutdown()
    assert not any(is_failure_notice(t) for t in await _kept_texts(pool))


async def test_a_model_copy_of_a_failure_notice_is_neither_said_kept_nor_windowed(pool, tmp_path):
    # the copy reads as a refusal (src/metacognition/answer_form.py): asked once more, copied again
    s1 = ScriptedLLM().say("Nice to meet you, Priya. What do you study? Confidence: 0.95",
                           f"(I cannot answer in words right now: {DEADLINE}.) Confidence: 0.95",
                           f"(I cannot answer in words right now: {DEADLINE}.) Confidence: 0.95")
    mind, delivered = await _mind(pool, tmp_path, s1)
    await _turn(mind, "user", PRIYA, 0)
    record = await _turn(mind, "dmn", "the octopus tanks at night", 5)
    assert record.winner.source == "dmn" and not record.delivered
    assert delivered == ["Nice to meet you, Priya. What do you study?"]
    [action] = json.loads(await pool.fetchval("SELECT actions FROM thought_log WHERE cycle = 2"))[:1]
    # no answer: the reflex notice stands in (src/loop/thinking.py `_instead_of`), never said unprompted
    assert action["allowed"] is False and "kept internal" in action["reason"]
    assert await pool.fetchval("SELECT winner->>'path' FROM thought_log WHERE cycle = 2") == "no_answer"
    window = mind.loop.fifo.messages
    assert [m.content for m in window] == [PRIYA, "Nice to meet you, Priya. What do you study?"]
    await mind.gates.lifecycle.shutdown()
    assert not any(is_failure_notice(t) for t in await _kept_texts(pool))


async def test_a_thought_enters_the_window_as_one_and_is_said_only_when_new(pool, tmp_path):
    repeat = "Priya Raman is a marine biologist at the Oceanário. Confidence: 0.95"
    new = "Octopuses taste with their arms: Priya might enjoy the new study on it. Confidence: 0.95"
    s1 = ScriptedLLM().say("Nice to meet you, Priya. What do you study? Confidence: 0.95", repeat, new, new)
    mind, delivered = await _mind(pool, tmp_path, s1)
    await _turn(mind, "user", PRIYA, 0)
    thought = f"This comes back to me, from today: '{PRIYA}'. Why does it matter now?"
    first = await _turn(mind, "dmn", thought, 5)
    assert not first.delivered                            # restates the window and the thought itself
    second = await _turn(mind, "dmn", "the octopus tanks at night", 6)
    assert second.delivered, second.actions                              # new and confident: said, unprompted
    third = await _turn(mind, "dmn", "octopus senses and night dives", 7)
    assert not third.delivered                            # the same again: a repeat of what was said
    assert delivered == ["Nice to meet you, Priya. What do you study?", new.split(" Confidence")[0]]

    reasons = [json.loads(r["actions"])[0]["reason"] for r in
               await pool.fetch("SELECT actions FROM thought_log WHERE cycle > 1 ORDER BY cycle")]
    assert "kept internal: a repeat" in reasons[0]
    assert "new (" in reasons[1] and "not a repeat" in reasons[1]
    assert "kept internal: a repeat" in reasons[2]

    shown = [(m.role, m.source_tag, m.content) for m in mind.loop.fifo.messages]
    assert shown[2] == ("user", "internal_dmn", f"[internal thought — default mode] {thought}")
    assert shown[3] == ("assistant", "internal_thought", THOUGHT_MARK + repeat.split(" Confidence")[0])
    assert shown[5] == ("assistant", "internal_self", new.split(" Confidence")[0])     # said: no mark
    assert shown[7][1] == "internal_thought" and shown[7][2].startswith(THOUGHT_MARK)

    kept = [(r["content"], r["source_tag"]) for r in await pool.fetch(
        "SELECT content, source_tag FROM scratch_buffer WHERE source_tag LIKE 'internal_%' ORDER BY id")]
    said_new = new.split(" Confidence")[0]
    assert kept == [("Nice to meet you, Priya. What do you study?", "internal_self"),
                    (thought, "internal_dmn"), (repeat.split(" Confidence")[0], "internal_thought"),
                    ("the octopus tanks at night", "internal_dmn"), (said_new, "internal_self"),
                    ("octopus senses and night dives", "internal_dmn"), (said_new, "internal_thought")]


async def test_an_unconfident_thought_stays_internal_whatever_it_says(pool, tmp_path):
    s1 = ScriptedLLM().say("Maybe the tanks? I might be wrong. Confidence: 0.3",
                           "Maybe the tanks need checking, I am unsure. Confidence: 0.3")
    mind, delivered = await _mind(pool, tmp_path, s1)
    record = await _turn(mind, "dmn", "the octopus tanks at night", 0)
    assert not record.delivered and delivered == []
    [action] = json.loads(await pool.fetchval("SELECT actions FROM thought_log"))[:1]
    assert "thought kept internal: confidence" in action["reason"]


# --- what earlier runs stored (sql/100) ----------------------------------------------------------------

MIGRATION = Path(__file__).resolve().parents[1] / "sql" / "100_speakers_and_internal_text.sql"


async def test_the_migration_mends_what_earlier_runs_kept(pool):
    unsaid, said = "Octopuses dream, perhaps.", "Nice to meet you, Priya."
    notice = f"(I cannot answer in words right now: {DEADLINE}.)"
    for cycle, tag, output, allowed in [(1, "internal_dmn", unsaid, False), (2, "external_user", said, True),
                                        (3, "internal_dmn", said, False), (4, "internal_dmn", notice, False)]:
        await pool.execute("INSERT INTO thought_log (cycle, source_tag, output, actions) VALUES ($1, $2, $3, $4)",
                           cycle, tag, output, json.dumps([{"kind": "communicate", "allowed": allowed}]))
    store = MemoryStore(pool, HashEmbedder())
    await store.store_many([NewMemory(unsaid, source_tag="internal_self"), NewMemory(said, source_tag="internal_self"),
                            NewMemory(notice, source_tag="internal_self"),
                            NewMemory(f"This comes back to me: '{notice}'", source_tag="internal_dmn"),
                            NewMemory("I cannot answer in words right now, said the user", source_tag="external_user")])
    await pool.execute("INSERT INTO scratch_buffer (content, source_tag) VALUES ($1, 'internal_self'), "
                       "($2, 'internal_self')", unsaid, notice)
    sql = MIGRATION.read_text(encoding="utf-8")
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(sql)
    memories = {r["content"]: r["source_tag"] for r in await pool.fetch("SELECT content, source_tag FROM memories")}
    assert memories == {unsaid: "internal_thought", said: "internal_self",     # said once: stays said
                        "I cannot answer in words right now, said the user": "external_user"}
    scratch = {r["content"]: (r["source_tag"], r["flushed_at"] is not None)
               for r in await pool.fetch("SELECT content, source_tag, flushed_at FROM scratch_buffer")}
    assert scratch == {unsaid: ("internal_thought", False), notice: ("internal_thought", True)}
