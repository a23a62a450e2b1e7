"""A refusal, talk about the answer or a repeat is never delivered nor stored as the mind's
words, whatever its confidence (issue 38 items 1, 2): the real loop, gates and thought_log
on PostgreSQL, System 1 scripted at the provider seam (no System 2: the draft would stand)."""

from __future__ import annotations

from src.loop.prompts import acknowledgement
from tests.fakes_llm import ScriptedLLM, fok
from tests.test_timing import _mind

REFUSAL = "I'm sorry, but I can't assist with that. Confidence: 0.9"


async def test_a_statement_refused_twice_is_acknowledged_in_the_users_words(pool, tmp_path):
    llm = ScriptedLLM(meta=fok("KNOWN", 0.9)).say(REFUSAL, REFUSAL)
    mind, delivered = await _mind(pool, tmp_path, llm, {"cycle_deadline_s": None})
    await mind.loop.submit("user", "I work as a veterinary radiographer at an animal hospital in Bristol.")
    await mind.loop.run(burst=True)
    # the retry was asked, naming the refusal
    first, retry = llm.of("generate")
    assert "declined to answer" in retry.messages[-1].content
    assert delivered == [acknowledgement("I work as a veterinary radiographer at an animal hospital in Bristol.")]
    assert delivered[0].endswith("you work as a veterinary radiographer at an animal hospital in Bristol.")
    row = await pool.fetchrow("SELECT output, winner->>'path' AS path FROM thought_log")
    assert row["path"] == "acknowledged" and "can't assist" not in row["output"]
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE content ILIKE '%assist with that%'") == 0
    await mind.close()


async def test_a_question_answered_about_the_answer_gets_the_reflex_reply_saying_why(pool, tmp_path):
    meta = "The confidence level of the answer was low because I did not provide a complete explanation."
    llm = ScriptedLLM(meta=fok("KNOWN", 0.9)).say(f"{meta} Confidence: 0.9", f"{meta} Confidence: 0.9")
    mind, delivered = await _mind(pool, tmp_path, llm, {"cycle_deadline_s": None})
    await mind.loop.submit("user", "Where does my sister live?")
    await mind.loop.run(burst=True)
    assert len(delivered) == 1
    assert delivered[0].startswith("(I cannot answer in words right now: the language model's answer was about "
                                   "itself, not an answer.)")
    assert "confidence level" not in delivered[0]
    await mind.close()


async def _told_then_asked(pool, tmp_path, llm, fact: str, question: str):
    """A mind told `fact`, then asked `question`, each answered in full; (mind, delivered)."""
    mind, delivered = await _mind(pool, tmp_path, llm, {"cycle_deadline_s": None})
    for line in (fact, question):
        await mind.loop.submit("user", line)
        await mind.loop.run(burst=True)
    return mind, delivered


async def test_the_users_fact_said_in_the_first_person_is_said_back_as_theirs(pool, tmp_path):
    """A 1.5B model answered with the user's fact as its own ("My favourite tea is …", issue 38)."""
    llm = ScriptedLLM(meta=fok("KNOWN", 0.9)).say("Noted: your favourite tea is lapsang souchong. Confidence: 0.9",
                                                  "My favourite tea is lapsang souchong. Confidence: 0.9")
    mind, delivered = await _told_then_asked(pool, tmp_path, llm, "My favourite tea is lapsang souchong.",
                                             "What tea do I like?")
    assert delivered[-1] == "Your favourite tea is lapsang souchong."
    assert await pool.fetchval("SELECT output FROM thought_log ORDER BY id DESC LIMIT 1") == delivered[-1]
    await mind.close()


async def test_a_stutter_to_a_question_is_not_delivered_and_an_empty_answer_to_a_statement_is_acknowledged(
        pool, tmp_path):
    """Issue 38's script: a 1.5B model copied the form of its earlier replies until it said
    "Noted: Noted: Noted: …" to the output cap; and a statement answered with no words twice
    got the reflex reply instead of an acknowledgement."""
    stutter = "Noted: " * 40
    llm = ScriptedLLM(meta=fok("KNOWN", 0.9)).say(f"{stutter}Confidence: 0.9", f"{stutter}Confidence: 0.9",
                                                  "Confidence: 0.9", "Confidence: 0.9")
    mind, delivered = await _mind(pool, tmp_path, llm, {"cycle_deadline_s": None})
    await mind.loop.submit("user", "How do I brew my tea?")
    await mind.loop.run(burst=True)
    first, retry = llm.of("generate")
    assert "the same few words over and over" in retry.messages[-1].content
    assert delivered[0].startswith("(I cannot answer in words right now: the language model's answer was the same "
                                   "words over and over.)") and "Noted: Noted" not in delivered[0]
    await mind.loop.submit("user", "My dog is a three-legged greyhound called Pepper.")
    await mind.loop.run(burst=True)
    assert delivered[1] == acknowledgement("My dog is a three-legged greyhound called Pepper.")
    paths = [r["path"] for r in await pool.fetch("SELECT winner->>'path' AS path FROM thought_log ORDER BY id")]
    assert paths == ["no_answer", "acknowledged"]
    await mind.close()


async def test_a_question_about_the_user_answered_about_the_mind_itself_is_not_delivered(pool, tmp_path):
    """Run G of issue 38's script: "What do I do for a living?" -> "I am a software engineer. My
    primary area of expertise…" (a 1.5B model speaking of itself; the user is a radiographer)."""
    llm = ScriptedLLM(meta=fok("KNOWN", 0.9)).say("Noted: you work as a radiographer. Confidence: 0.9",
                                                  "I am a software engineer. My primary area of expertise is "
                                                  "software development. Confidence: 0.9")
    mind, delivered = await _told_then_asked(pool, tmp_path, llm, "I work as a radiographer at the animal hospital.",
                                             "What do I do for a living?")
    assert delivered[-1].startswith("(I cannot answer in words right now: the language model's answer was about "
                                    "itself, asked about you.)")
    assert "software engineer" not in delivered[-1]
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE content ILIKE '%software engineer%'") == 0
    await mind.close()
