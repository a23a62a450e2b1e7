"""Usefulness from outside recall (issue 25 item 3, plan §5.3): used = the answer drew on it
or the user confirmed / corrected it; re-access alone is not use. Real loop, real database;
fakes only at the provider seam (HashEmbedder, ScriptedLLM)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from src.consolidation.evolution.dirichlet_evolution import run_outcomes
from src.consolidation.evolution.settings import EvolutionSettings
from src.outcomes.settings import UseSettings
from src.outcomes.use import reflection, reflections, words
from src.recall.store import NewMemory
from tests.fakes_llm import ScriptedLLM
from tests.test_loop import _mind

CFG = UseSettings()
LIGHTHOUSE = "The lighthouse keeper painted the harbour door blue in spring."
BEEHIVES = "My sister Mara keeps three beehives behind the orchard."


def _line(text: str, kind: str = "episodic") -> str:
    return f"- [{kind}] The user said: {text}"


def test_an_answer_that_takes_the_memorys_own_words_drew_on_it():
    r = reflection(1, "situational", _line(BEEHIVES), words("what does my sister keep?"),
                   words("Your sister Mara keeps bees: three beehives, behind the orchard."), CFG)
    assert r.reflected and r.shared == ("beehive", "behind", "mara", "orchard", "three")
    assert r.share == 1.0      # "sister" and "keep(s)" were the question's: not the memory's own words


def test_repeating_the_question_is_not_drawing_on_a_memory():
    r = reflection(1, "situational", _line("My cat Miso is 4 years old."), words("How old is my cat Miso?"),
                   words("I don't know how old your cat Miso is."), CFG)
    assert not r.reflected and r.shared == () and r.share == 0.0
    # the speaker label ("The user said:") is no word of the memory's own
    label_only = reflection(1, "situational", _line("Miso."), words("Miso?"), words("The user asked."), CFG)
    assert not label_only.reflected


def test_the_user_saying_a_memory_again_is_a_restatement():
    memory = _line("I want to always be honest with people, even when it is hard.")
    focus = words("I always want to be honest with people, even when it is hard!")
    r = reflection(1, "situational", memory, focus, words("Good."), CFG, from_user=True)
    assert (r.kind, r.share) == ("restated", 1.0) and not r.reflected
    assert reflection(1, "situational", memory, focus, words("Good."), CFG).kind is None     # a thought's, not the user's
    partly = words("should I be honest with people?")                                   # 3 of its 6 words
    assert reflection(1, "situational", memory, partly, words("Yes."), CFG, from_user=True).kind is None


def test_one_shared_word_of_many_is_not_enough_and_the_tracks_are_settings():
    r = reflection(1, "situational", _line(LIGHTHOUSE), frozenset(), words("The door is closed."), CFG)
    assert (r.shared, r.reflected, r.share) == (("door",), False, 0.1429)   # 1 of 7 own words
    entries = [SimpleNamespace(id=1, track="immutable", text=_line(LIGHTHOUSE)),
               SimpleNamespace(id=2, track="identity", text=_line(LIGHTHOUSE)),
               SimpleNamespace(id=2, track="situational", text=_line(BEEHIVES))]
    got = reflections(entries, "tell me", "The keeper painted the harbour door blue.", CFG)
    assert [(x.memory_id, x.track, x.reflected) for x in got] == [(2, "identity", True)]   # once per memory
    assert reflections(entries, "tell me", "The keeper painted the harbour door blue.",
                       UseSettings(tracks=("situational",)))[0].reflected is False


async def _answer(mind, question: str) -> None:
    assert await mind.loop.submit("user", question) is not None
    record = await mind.loop.cycle()
    assert record is not None and record.output


async def test_recalled_ten_times_but_never_drawn_on_is_not_used(pool, tmp_path):
    """The old rule called a memory used when it was accessed again within 3 days — and
    recall itself is an access. A memory recalled ten times that no answer reflects is
    not used; one reflected once is, for that recall."""
    s1 = ScriptedLLM().say(*(["I could not say much about that. Confidence: 0.95"] * 9),
                           "Your sister Mara keeps three beehives behind the orchard. Confidence: 0.95")
    mind, _ = await _mind(pool, tmp_path, system1=s1)
    lighthouse, beehives = [await mind.store.store(NewMemory(t)) for t in (LIGHTHOUSE, BEEHIVES)]
    for i in range(10):
        await _answer(mind, f"what comes to mind, question number {i}?")
    starts = await pool.fetch("SELECT memory_id, at FROM recall_outcomes ORDER BY id")
    lit_recalls = [r for r in starts if r["memory_id"] == lighthouse]
    recalled = len(lit_recalls)
    assert recalled >= 8                                                  # recalled (nearly) every time ...
    assert await pool.fetchval("SELECT access_count FROM memories WHERE id = $1", lighthouse) == recalled  # re-accessed
    uses = await pool.fetch("SELECT memory_id, kind, valence, share, cycle, evidence FROM memory_uses")
    assert [(u["memory_id"], u["kind"], u["cycle"], u["valence"]) for u in uses] == [
        (beehives, "reflected", 10, 0.0)]
    evidence = json.loads(uses[0]["evidence"])
    assert uses[0]["share"] >= CFG.min_share and {"mara", "beehive", "orchard"} <= set(evidence["words"])

    counts: dict[str, int] = {}
    later = max(r["at"] for r in starts) + timedelta(days=4)
    await run_outcomes(pool, EvolutionSettings(), later, counts)
    scored = await pool.fetch("SELECT memory_id, used, wrong FROM recall_outcomes ORDER BY id")
    lit = [(r["used"], r["wrong"]) for r in scored if r["memory_id"] == lighthouse]
    assert lit == [(False, False)] * recalled
    bee = [(r["used"], r["wrong"]) for r in scored if r["memory_id"] == beehives]
    assert bee[:-1] == [(False, False)] * (len(bee) - 1) and bee[-1] == (True, False)   # the recall the answer drew on
    q = {r["id"]: r["utility_score"] for r in await pool.fetch("SELECT id, utility_score FROM memories")}
    assert q[lighthouse] == pytest.approx((1 - 0.9 ** recalled) * -0.25)      # each recall "left alone", from 0
    n = len(bee)
    assert q[beehives] == pytest.approx((1 - 0.9 ** n) * (1 - (n - 1) * 0.25) / n)  # one of its recalls drawn on


async def test_the_users_plain_feedback_confirms_what_the_answer_before_drew_on(pool, tmp_path):
    s1 = ScriptedLLM().say("Your sister Mara keeps three beehives behind the orchard. Confidence: 0.95",
                           "Glad to help. Confidence: 0.95",
                           "The lighthouse keeper painted the harbour door blue. Confidence: 0.95",
                           "Sorry about that. Confidence: 0.95")
    mind, _ = await _mind(pool, tmp_path, system1=s1)
    lighthouse, beehives = [await mind.store.store(NewMemory(t)) for t in (LIGHTHOUSE, BEEHIVES)]
    await _answer(mind, "who keeps what behind the orchard?")
    await _answer(mind, "Thank you, that's right.")
    await _answer(mind, "and the harbour?")
    await _answer(mind, "No, that's wrong.")
    rows = await pool.fetch("SELECT memory_id, kind, valence, cycle, evidence FROM memory_uses ORDER BY id")
    assert [(r["memory_id"], r["kind"], r["valence"], r["cycle"]) for r in rows] == [
        (beehives, "reflected", 0.0, 1), (beehives, "confirmed", 1.0, 2),
        (lighthouse, "reflected", 0.0, 3), (lighthouse, "corrected", -1.0, 4)]
    assert [json.loads(r["evidence"]).get("answer_cycle") for r in rows] == [None, 1, None, 3]
    # folded into utility once: +1 for the confirmed, -1 for the corrected (no recall window has passed)
    counts: dict[str, int] = {}
    await run_outcomes(pool, EvolutionSettings(), datetime.now(UTC), counts)
    assert counts["utility_updated"] == 2
    q = {r["id"]: r["utility_score"] for r in await pool.fetch("SELECT id, utility_score FROM memories")}
    assert (q[beehives], q[lighthouse]) == (pytest.approx(0.1), pytest.approx(-0.1))
    await run_outcomes(pool, EvolutionSettings(), datetime.now(UTC), {})
    assert await pool.fetchval("SELECT utility_score FROM memories WHERE id = $1", beehives) == pytest.approx(0.1)
