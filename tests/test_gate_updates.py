"""A user's new statement that updates an older one (issue 37 item 3, src/gates/updates.py):
linked as superseding it, never judged a contradiction; distinct facts and other speakers'
lines are never linked; with a model, layer 3 tells update from contradiction in one call."""

from __future__ import annotations

import json
import random

import pytest

from src.gates.memory_gate import Gates
from src.gates.prompts import RelationAnswer
from src.gates.updates import UpdateThresholds, change_cues, judge
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.fakes import HashEmbedder
from tests.gate_fakes import ScriptedMetaLLM, gate_settings

TH = UpdateThresholds()


@pytest.mark.parametrize(("older", "newer", "similarity", "relation"), [
    ("My sister Maren lives in Porto.", "Update: my sister Maren moved to Lisbon last month.", 0.6, "update"),
    ("My dentist appointment is on Tuesday at 10am.", "The dentist moved my appointment to Thursday at 3pm.",
     0.7, "update"),
    ("I work as a nurse.", "I quit nursing, I now work as a software tester at Finch Labs.", 0.68, "update"),
    # a strong cue and no word in common: the subject must be close ("moved … last month" twice)
    ("I moved from Leeds to Bristol last month.", "Update: my sister Maren moved to Lisbon last month.", 0.57,
     "not_update"),
    # a strong cue, another subject
    ("I keep my notes in Notion.", "I moved the sofa to the other room.", 0.2, "not_update"),
    # a content word in common lowers the bar a little, not to nothing
    ("My landlord is Mr. Petrov.", "Our landlord sold the flat to a company.", 0.4, "update"),
    # adds rather than replaces
    ("I take metformin for diabetes.", "I also take a statin now.", 0.9, "not_update"),
    ("My brother Arjun is a doctor.", "My other brother Dev moved to Leeds.", 0.9, "not_update"),
    # a whole life is contradicted, not updated
    ("I've never smoked in my life.", "I quit smoking in 2016.", 0.8, "not_update"),
    # a weak cue needs a closer subject
    ("My dad retired last year.", "Dad spends most days fishing now.", 0.5, "not_update"),
    ("I weigh 85 kg.", "I'm 78 kg now.", 0.7, "update"),
    # the same thing said again is no change, though it holds a cue
    ("The violin lesson moved to Thursday.", "The violin lesson moved to Thursday, as I said.", 0.9, "undecided"),
    # no cue: undecided (a model may be asked)
    ("My sister lives in Porto.", "My sister is a pilot.", 0.7, "undecided"),
])
def test_judge(older, newer, similarity, relation):
    assert judge(older, newer, similarity, TH).relation == relation


def test_change_cues_are_words_and_phrases():
    strong, weak = change_cues("From now on I'm no longer vegetarian, these days I eat fish")
    assert {"from now on", "no longer"} <= strong
    assert {"now", "these days"} <= weak


async def _gates(pool, llm=None) -> Gates:
    return Gates.build(pool, HashEmbedder(), llm or ScriptedMetaLLM(configured=False),
                       gate_settings(noise_floor=0.0), Safety(), rng=random.Random(3))


async def _user_fact(pool, text: str, tag: str = "external_user", **meta) -> int:
    return await MemoryStore(pool, HashEmbedder()).store(NewMemory(text, "episodic", source_tag=tag, metadata=meta))


async def _links(pool) -> set[tuple[str, str]]:
    rows = await pool.fetch("SELECT n.content AS newer, o.content AS older FROM memory_supersedes s "
                            "JOIN memories n ON n.id = s.insight_id JOIN memories o ON o.id = s.source_id "
                            "WHERE s.via = 'update'")
    return {(r["newer"], r["older"]) for r in rows}


async def test_a_changed_fact_supersedes_the_older_which_stays_and_is_not_contradicted(pool):
    older = await _user_fact(pool, "My sister Maren lives in Porto.")
    await _user_fact(pool, "My sister Maren is a pilot for TAP.")          # distinct: stays current
    before = await pool.fetchrow("SELECT depth_weight_alpha, depth_weight_beta FROM memories WHERE id = $1", older)
    gates = await _gates(pool)
    await gates.admit("Update: my sister Maren moved to Lisbon last month.", exchange=False)
    await gates.exit.flush(reason="test")
    assert await _links(pool) == {("Update: my sister Maren moved to Lisbon last month.",
                                   "My sister Maren lives in Porto.")}
    after = await pool.fetchrow("SELECT depth_weight_alpha, depth_weight_beta FROM memories WHERE id = $1", older)
    assert after == before                       # kept as it was: true then, not contradicted
    details = json.loads(await pool.fetchval("SELECT details FROM gate_decisions WHERE gate = 'exit'"))
    assert details["update_of"]["memory_id"] == older and "moved" in details["update_of"]["why"]
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE metadata->>'flag' = 'contradiction'") == 0


async def test_other_speakers_and_the_minds_lines_are_never_linked(pool):
    await _user_fact(pool, "My sister Maren lives in Porto.", tag="import", speaker="Kim")
    await _user_fact(pool, "Your sister Maren lives in Porto.", tag="internal_self")
    gates = await _gates(pool)
    await gates.admit("Update: my sister Maren moved to Lisbon last month.", exchange=False)
    await gates.admit("Kim: my sister Maren moved to Lisbon.", source_tag="import", exchange=False)
    await gates.exit.flush(reason="test")
    assert await _links(pool) == set()


async def test_two_statements_in_one_flush_link_within_the_chunk(pool):
    gates = await _gates(pool)
    await gates.admit("My dentist appointment is on Tuesday at 10am.", exchange=False)
    await gates.admit("The dentist moved my appointment to Thursday at 3pm.", exchange=False)
    await gates.exit.flush(reason="test")
    assert await _links(pool) == {("The dentist moved my appointment to Thursday at 3pm.",
                                   "My dentist appointment is on Tuesday at 10am.")}


async def test_layer_three_tells_an_update_without_a_cue_in_one_call(pool):
    await _user_fact(pool, "My sister Maren lives in Porto with her cat.")
    llm = ScriptedMetaLLM(relation=lambda a, b: "update" if "Lisbon" in a else "neither")
    gates = await _gates(pool, llm)
    await gates.admit("My sister Maren lives in Lisbon with her cat.", exchange=False)
    await gates.exit.flush(reason="test")
    asked = [c for c in llm.calls if c.schema is RelationAnswer]
    assert len(asked) == 1 and asked[0].statements == ("My sister Maren lives in Lisbon with her cat.",
                                                       "My sister Maren lives in Porto with her cat.")
    assert "said B earlier and A now" in asked[0].question
    assert await _links(pool) == {("My sister Maren lives in Lisbon with her cat.",
                                   "My sister Maren lives in Porto with her cat.")}
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE metadata->>'flag' = 'contradiction'") == 0


async def test_layer_three_still_flags_a_contradiction(pool):
    await _user_fact(pool, "My sister Maren lives in Porto with her cat.")
    llm = ScriptedMetaLLM(verdict=lambda a, b: True)
    gates = await _gates(pool, llm)
    await gates.admit("My sister Maren lives in Lisbon with her cat.", exchange=False)
    await gates.exit.flush(reason="test")
    assert [c.schema for c in llm.calls] == [RelationAnswer]
    assert await _links(pool) == set()
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE metadata->>'flag' = 'contradiction'") == 1


def test_the_statement_updated_is_the_one_about_the_same_subject_not_the_closest():
    from src.gates.updates import Earlier, pick
    earlier = [Earlier(1, "I work as a nurse at the Royal Infirmary.", 0.55),     # closer, another subject
               Earlier(2, "I live in Leeds, near Roundhay Park.", 0.40)]
    older, call = pick("I moved from Leeds to Bristol last month.", earlier, TH)
    assert older.memory_id == 2 and "moved" in call.reason


async def test_an_older_line_judged_after_its_update_was_stored_is_still_linked(pool):
    """A line kept in the buffer a round longer is judged after a later line was stored."""
    gates = await _gates(pool)
    await gates.admit("My dentist appointment is on Tuesday at 10am.", exchange=False)
    await gates.admit("The dentist moved my appointment to Thursday at 3pm.", exchange=False)
    older_id = await pool.fetchval("SELECT id FROM scratch_buffer WHERE content LIKE 'My dentist%'")
    await pool.execute("UPDATE scratch_buffer SET flushed_at = now() WHERE id = $1", older_id)   # held back
    await gates.exit.flush(reason="test")
    assert await pool.fetchval("SELECT count(*) FROM memories") == 1
    await pool.execute("UPDATE scratch_buffer SET flushed_at = NULL WHERE id = $1", older_id)     # its turn now
    await gates.exit.flush(reason="test")
    assert await _links(pool) == {("The dentist moved my appointment to Thursday at 3pm.",
                                   "My dentist appointment is on Tuesday at 10am.")}


def test_change_and_time_words_say_nothing_of_the_subject():
    from src.gates.updates import Earlier, pick
    earlier = [Earlier(1, "I moved from Leeds to Bristol last month.", 0.60),
               Earlier(2, "My sister Maren lives in Porto.", 0.55)]
    older, _ = pick("Update: my sister Maren moved to Lisbon last month.", earlier, TH)
    assert older.memory_id == 2
