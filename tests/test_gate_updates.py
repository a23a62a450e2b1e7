"""A user's new statement that updates an older one (issue 37 item 3, src/gates/updates.py):
linked as superseding it, never judged a contradiction; distinct facts and other speakers'
lines are never linked; with a model, layer 3 tells update from contradiction in one call."""

from __future__ import annotations

import json
import random

import pytest

from src.gates.memory_gate import Gates
from src.gates.prompts import RelationsAnswer
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
    # an event told of the same subject is no change of it, however close
    ("My favourite film is Paddington 2, no shame.", "Watched Paddington 2 again last night with the kids.",
     0.83, "undecided"),
    ("My shed's full of woodworking tools.", "Someone tried to break into the shed last night.", 0.66,
     "undecided"),
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
    asked = [c for c in llm.calls if c.schema is RelationsAnswer]
    assert len(asked) == 1 and asked[0].statements == ("My sister Maren lives in Lisbon with her cat.",
                                                       "My sister Maren lives in Porto with her cat.")
    assert "said the numbered statements earlier and A now" in asked[0].question
    assert await _links(pool) == {("My sister Maren lives in Lisbon with her cat.",
                                   "My sister Maren lives in Porto with her cat.")}
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE metadata->>'flag' = 'contradiction'") == 0


async def test_layer_three_still_flags_a_contradiction(pool):
    await _user_fact(pool, "My sister Maren lives in Porto with her cat.")
    llm = ScriptedMetaLLM(verdict=lambda a, b: True)
    gates = await _gates(pool, llm)
    await gates.admit("My sister Maren lives in Lisbon with her cat.", exchange=False)
    await gates.exit.flush(reason="test")
    assert [c.schema for c in llm.calls] == [RelationsAnswer]
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


FOCUS = "I drive a Ford Focus to work every day."
KIA = "The Kia is great for work every day, charging is so cheap."   # cosine 0.48 stored (hash embedder)


async def _told_the_kia(pool, llm, **exit_settings):
    await _user_fact(pool, FOCUS)
    gates = Gates.build(pool, HashEmbedder(), llm, gate_settings(noise_floor=0.0, **exit_settings), Safety(),
                        rng=random.Random(3))
    await gates.admit(KIA, exchange=False)
    await gates.exit.flush(reason="test")
    return [c.statements for c in llm.calls if c.schema is RelationsAnswer]


async def test_a_change_told_without_a_cue_below_the_screen_is_asked_of_the_model(pool):
    """No verb of change and a cosine under the contradiction screen's 0.7: only a model can
    tell that the Kia replaced the Focus; the relation question is asked once."""
    llm = ScriptedMetaLLM(relation=lambda a, b: "update" if "Kia" in a and "Focus" in b else "neither")
    assert await _told_the_kia(pool, llm) == [(KIA, FOCUS)]
    assert await _links(pool) == {(KIA, FOCUS)}
    why = json.loads(await pool.fetchval("SELECT details FROM gate_decisions WHERE gate = 'exit'"))["update_of"]["why"]
    assert why == "layer 3: the model said the newer updates it"
    assert {c.purpose for c in llm.calls} == {"gate_contradiction"}


async def test_one_relation_question_a_statement_about_all_its_closest_earlier_ones(pool):
    """The earlier statements a model is asked about go into one call, numbered; at most
    `relation_pairs` of them, the closest first; the one it names is linked, no other."""
    others = ["I work every day at the depot, great team.", "Charging my phone every day is a pain."]
    for text in others:
        await _user_fact(pool, text)
    llm = ScriptedMetaLLM(relation=lambda a, b: "update" if "Focus" in b else "neither")
    asked = await _told_the_kia(pool, llm, relation_floor=0.0, relation_pairs=3)
    assert len(asked) == 1 and asked[0][0] == KIA and sorted(asked[0][1:]) == sorted([FOCUS, *others])
    assert await _links(pool) == {(KIA, FOCUS)}
    question = next(c.question for c in llm.calls if c.schema is RelationsAnswer)
    assert question.index("1. ") < question.index("2. ") < question.index("3. ")
    await pool.execute("TRUNCATE memories, scratch_buffer, gate_decisions CASCADE")
    for text in others:
        await _user_fact(pool, text)
    closest = ScriptedMetaLLM(relation=lambda a, b: "neither")
    (only,) = await _told_the_kia(pool, closest, relation_floor=0.0, relation_pairs=1)
    assert len(only) == 2 and await _links(pool) == set()      # A and the one closest


async def test_a_second_question_asks_about_what_the_statement_is_about(pool):
    """The first question's earlier statements miss the Focus (closer ones fill it); the model
    says the Kia line is about driving a Ford Focus, and a second call asks about the user's
    statements nearest that phrase: the Focus, which it updates."""
    others = ["I work every day at the depot, great team.", "Charging my phone every day is a pain."]
    for text in others:
        await _user_fact(pool, text)
    llm = ScriptedMetaLLM(relation=lambda a, b: "update" if "Focus" in b else "neither",
                          about=lambda a: "driving a Ford Focus")
    asked = await _told_the_kia(pool, llm, relation_floor=0.0, relation_pairs=1, relation_about=1,
                                relation_about_floor=0.0)
    assert len(asked) == 2 and FOCUS not in asked[0] and asked[1] == (KIA, FOCUS)
    assert await _links(pool) == {(KIA, FOCUS)}
    why = json.loads(await pool.fetchval("SELECT details FROM gate_decisions WHERE gate = 'exit'"))["update_of"]["why"]
    assert why == "layer 3: the model said the newer updates it (asked by what it is about: driving a Ford Focus)"


async def test_no_second_question_after_an_update_or_when_turned_off(pool):
    llm = ScriptedMetaLLM(relation=lambda a, b: "update" if "Focus" in b else "neither",
                          about=lambda a: "driving a Ford Focus")
    assert await _told_the_kia(pool, llm, relation_about_floor=0.0) == [(KIA, FOCUS)]     # named at once
    await pool.execute("TRUNCATE memories, scratch_buffer, gate_decisions CASCADE")
    for text in ["I work every day at the depot, great team.", "Charging my phone every day is a pain."]:
        await _user_fact(pool, text)
    off = ScriptedMetaLLM(relation=lambda a, b: "update" if "Focus" in b else "neither",
                          about=lambda a: "driving a Ford Focus")
    asked = await _told_the_kia(pool, off, relation_floor=0.0, relation_pairs=1, relation_about=0)
    assert len(asked) == 1 and await _links(pool) == set()


async def test_a_failed_relation_question_links_nothing_and_the_flush_goes_on(pool):
    llm = ScriptedMetaLLM(fail=True)
    assert await _told_the_kia(pool, llm) == [(KIA, FOCUS)]
    assert await _links(pool) == set()
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE content = $1", KIA) == 1


async def test_the_models_other_answers_link_nothing_and_flag_nothing(pool):
    for answer in ("neither", "contradiction"):
        await pool.execute("TRUNCATE memories CASCADE")
        llm = ScriptedMetaLLM(relation=lambda a, b, answer=answer: answer)
        assert await _told_the_kia(pool, llm) == [(KIA, FOCUS)]
        assert await _links(pool) == set()
        # below the screen's similarity a model's "contradiction" is no verdict (plan §2.8)
        assert await pool.fetchval("SELECT count(*) FROM memories WHERE metadata->>'flag' = 'contradiction'") == 0


async def test_no_relation_question_in_reflex_mode_or_when_turned_off(pool):
    reflex = ScriptedMetaLLM(relation=lambda a, b: "update", configured=False)
    assert await _told_the_kia(pool, reflex) == []
    await pool.execute("TRUNCATE memories CASCADE")
    off = ScriptedMetaLLM(relation=lambda a, b: "update")
    assert await _told_the_kia(pool, off, relation_pairs=0) == []
    assert await _links(pool) == set()


def test_what_is_asked_is_the_cues_pick_then_the_closest_few_above_the_floor():
    from src.gates.evaluation import Neighbour
    from src.gates.model_questions import to_ask
    earlier = [Neighbour(0.62, "I take metformin for diabetes.", memory_id=1),
               Neighbour(0.55, "I work nights at the bakery.", memory_id=2),
               Neighbour(0.50, "I live in Leeds.", memory_id=3),
               Neighbour(0.20, "I like jazz.", memory_id=4)]
    assert [n.memory_id for n in to_ask(earlier, 2, 0.35)] == [1, 2]
    assert [n.memory_id for n in to_ask(earlier, 5, 0.35)] == [1, 2, 3]          # not below the floor
    assert [n.memory_id for n in to_ask(earlier, 2, 0.35, offline=earlier[2])] == [3, 1, 2]


async def test_a_whole_life_word_said_of_a_habit_is_still_asked_of_the_model(pool):
    """The cues rule "always" and "ever" out as whole-life claims; said of a habit, the older
    is still changed: the model is asked, and its answer links."""
    older, newer = "I always order a flat white at the cafe.", "An oat latte at the cafe is my usual these days."
    await _user_fact(pool, older)
    llm = ScriptedMetaLLM(relation=lambda a, b: "update" if "flat white" in b else "neither")
    gates = Gates.build(pool, HashEmbedder(), llm, gate_settings(noise_floor=0.0, relation_floor=0.0), Safety(),
                        rng=random.Random(3))
    await gates.admit(newer, exchange=False)
    await gates.exit.flush(reason="test")
    assert [c.statements for c in llm.calls if c.schema is RelationsAnswer] == [(newer, older)]
    assert await _links(pool) == {(newer, older)}


async def test_the_model_confirms_or_overrules_the_offline_pick(pool):
    """With a model, the cue's pick is a question too: a cue read on another subject links
    the wrong statement; when the model does not answer, the cue stands."""
    said = "Update: my sister Maren moved to Lisbon last month."
    for llm, linked in [(ScriptedMetaLLM(relation=lambda a, b: "neither"), set()),
                        (ScriptedMetaLLM(fail=True), {(said, "My sister Maren lives in Porto.")}),
                        (ScriptedMetaLLM(relation=lambda a, b: "update" if "Porto" in b else "neither"),
                         {(said, "My sister Maren lives in Porto.")})]:
        await pool.execute("TRUNCATE memories, scratch_buffer, gate_decisions CASCADE")
        await _user_fact(pool, "My sister Maren lives in Porto.")
        gates = await _gates(pool, llm)
        await gates.admit(said, exchange=False)
        await gates.exit.flush(reason="test")
        assert await _links(pool) == linked
        asked = [c.statements for c in llm.calls if c.schema is RelationsAnswer]
        assert asked[0] == (said, "My sister Maren lives in Porto.")       # the pick is asked first


def test_which_earlier_statement_is_linked_from_the_models_answers():
    from src.gates.evaluation import Neighbour
    from src.gates.model_questions import linked
    pick, near, far = (Neighbour(s, t, memory_id=i) for i, (s, t) in
                       enumerate([(0.6, "I live in Leeds."), (0.5, "I rent in Leeds."), (0.4, "I like jazz.")], 1))
    assert linked(pick, [(pick, "neither"), (near, "update")]) is near        # the first update, past the pick
    assert linked(pick, [(pick, "update"), (near, "update")]) is pick
    assert linked(pick, [(pick, "neither"), (near, "neither")]) is None       # the model overrules the cue
    assert linked(pick, [(pick, None), (near, "neither")]) is pick            # no answer about it: the cue stands
    assert linked(pick, []) is pick
    assert linked(None, [(far, "contradiction")]) is None


class _Answers:
    """A model that answers the relation question with the given `RelationsAnswer` fields."""

    configured = True

    def __init__(self, **answer):
        self.answer, self.questions = answer, []

    async def meta_call_structured(self, question, schema, *, purpose, max_tokens=None, caller=None):
        from src.providers.protocols import LLMResult, Structured
        self.questions.append((question, purpose))
        value = schema(summary_a="A", **self.answer)
        return Structured(value, LLMResult(value.model_dump_json(), "m", "p", 10, 5, 1.0), repaired=False)


async def test_a_numbered_answer_out_of_range_names_nothing_and_an_update_is_no_contradiction():
    from src.gates.contradiction import ask_relations
    earlier = ["I live in Leeds.", "I work as a nurse."]
    wild = _Answers(updates=9, contradicts=[0, 7])            # numbers the question never gave
    said = await ask_relations(wild, "I moved to Bristol.", earlier)
    assert said.relations == ("neither", "neither") and said.layer == "llm"
    assert wild.questions[0][1] == "gate_contradiction" and "1. I live in Leeds." in wild.questions[0][0]
    both = _Answers(updates=1, contradicts=[1, 2])             # the one it updates is not contradicted
    assert (await ask_relations(both, "I moved to Bristol.", earlier)).relations == ("update", "contradiction")
