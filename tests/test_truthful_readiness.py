"""Readiness, /good and the DMN tell the truth (issue 40 item 7).

- Readiness milestone 2, "First retrieval success": a memory the mind held before the question,
  relevant by a stated measure (cosine to the question at or above the embed model's floor, and a
  content word in common), never the question's own text. A newcomer's run once
  credited it to "My name is Dana Kowalski." with "similarity 1.00" for "I have a cat called
  Pimenta": recall's blended score is spread over the candidates, so its best is always 1.00.
- `/good` without an id credits only the memories the last answer drew on, and says so in words
  (it once named a source file and credited every memory of the context, 16 unrelated imports).
- The DMN's "about the self" bias is the mind's own memories, not the user's "I …" lines.

Real loop and database; fakes only at the provider seam (HashEmbedder, ScriptedLLM).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import numpy as np

from src.bootstrap.readiness import format_readiness, readiness
from src.dmn import repository as dmn_repo
from src.dmn.generator import pool_features
from src.dmn.sampling import about_self, bias_weights, draw
from src.dmn.settings import SamplingBias
from src.loop.inner_life import relevant_recall
from src.outcomes.feedback import feedback_command
from src.outcomes.settings import OutcomeSettings
from src.recall.speakers import SAID_TAG, THOUGHT_TAG
from src.recall.store import NewMemory
from tests.fakes_llm import ScriptedLLM
from tests.test_loop import _mind

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
NEWCOMER = {"bootstrap": {"seed_boundaries": False}}   # a store of the user's lines only


async def _say(mind, text: str, at: datetime, *, flush_first: bool = False) -> None:
    """The user says `text`; the turn is answered at `at`. `flush_first`: the scratch flush
    (which runs in the background) persists the message before its own turn recalls."""
    await mind.loop.submit("user", text, now=at)
    if flush_first:
        await mind.gates.exit.flush(reason="test")
    await mind.loop.cycle(at)
    await mind.gates.exit.flush(reason="test")


async def _retrieval_success(pool):
    return {a.key: a for a in await readiness(pool)}["retrieval_success"]


async def _memory_id(pool, content: str) -> int:
    return await pool.fetchval("SELECT id FROM memories WHERE content = $1", content)


async def test_the_newcomers_name_is_no_retrieval_success_for_the_cat_the_cat_line_is_later(pool, tmp_path):
    mind, _ = await _mind(pool, tmp_path, overrides=NEWCOMER)
    await _say(mind, "My name is Dana Kowalski.", T0)
    dana = await _memory_id(pool, "My name is Dana Kowalski.")
    # recall brings Dana's line back for the cat (the only memory: recall's blended score 1.00),
    # but it shares no word with the question and its cosine is far below the floor
    await _say(mind, "I have a cat called Pimenta", T0 + timedelta(minutes=1))
    recalled = json.loads(await pool.fetchval("SELECT context_summary->'recalled' FROM thought_log WHERE cycle = 2"))
    assert recalled == [dana]
    assert (await _retrieval_success(pool)).reached_at is None
    # a later question finds the cat line: that is retrieval success, with its measure stated
    cat = await _memory_id(pool, "I have a cat called Pimenta")
    await _say(mind, "Do I have a cat?", T0 + timedelta(minutes=2))
    success = await _retrieval_success(pool)
    assert success.reached_at is not None
    event = success.event
    assert event["cycle"] == 3 and event["memory_ids"] == [cat] and event["query"] == "Do I have a cat?"
    cosine = re.fullmatch(r"cosine (0\.\d\d) ≥ 0\.35, shares 'cat'", event["measure"])
    assert cosine is not None and float(cosine.group(1)) >= 0.35
    text = format_readiness(await readiness(pool))
    assert f"memory #{cat}; " in text and "cosine 0." in text and "≥ 0.35, shares 'cat'" in text
    assert "similarity 1.00" not in text


async def test_the_questions_own_text_is_no_retrieval_success(pool, tmp_path):
    """The message persisted before its own turn recalls (the flush runs in the background) comes
    back at cosine ~1 sharing every word: it is the question, not a memory recalled for it. The
    same words said again are not one either."""
    mind, _ = await _mind(pool, tmp_path, overrides=NEWCOMER)
    await _say(mind, "I have a cat called Pimenta", T0, flush_first=True)
    own = await _memory_id(pool, "I have a cat called Pimenta")
    assert json.loads(await pool.fetchval("SELECT context_summary->'recalled' FROM thought_log WHERE cycle = 1")) == [own]
    await _say(mind, "I have a cat called Pimenta", T0 + timedelta(minutes=1))
    assert (await _retrieval_success(pool)).reached_at is None
    await _say(mind, "Do I have a cat?", T0 + timedelta(minutes=2))
    success = await _retrieval_success(pool)
    assert success.reached_at is not None and success.event["memory_ids"] == [own]


def _recalled(mid: int, content: str, cosine: float | None, *, scratch: int | None = None,
              seed: bool = False) -> SimpleNamespace:
    hit = SimpleNamespace(content=content, similarity=cosine, immutable=seed,
                          metadata={} if scratch is None else {"scratch_id": scratch})
    return SimpleNamespace(id=mid, hit=hit)


def test_the_measure_of_retrieval_success_part_by_part():
    q = "what is my cat called?"
    cat = _recalled(3, "I have a cat called Pimenta", 0.62)
    assert relevant_recall([cat], q, floor=0.35).measure() == "cosine 0.62 ≥ 0.35, shares 'called', 'cat'"
    assert relevant_recall([cat], q, floor=0.35).measure(unkept=True) == (
        "cosine 0.62 ≥ 0.35, shares 2 content word(s) with the question")
    assert relevant_recall([cat], q, floor=0.7) is None                              # under the floor
    assert relevant_recall([_recalled(3, "I have a cat", None)], q, floor=0.35) is None   # no cosine: no measure
    # stored from this turn's own scratch row: the question, whatever its words became
    assert relevant_recall([_recalled(9, "Pimenta the cat is called", 0.9, scratch=8), cat], q,
                           own_scratch=(8,), floor=0.35).memory_id == 3
    assert relevant_recall([_recalled(4, "What is my cat called", 0.99)], q, floor=0.35) is None   # the same words
    # no word in common: not counted, even when recall ranks it first and its cosine passes the floor
    name = _recalled(5, "My name is Dana Kowalski.", 0.5)
    assert relevant_recall([name, cat], q, floor=0.35).memory_id == 3
    assert relevant_recall([name], q, floor=0.35) is None
    assert relevant_recall([_recalled(1, "I do not deceive my cat", 0.8, seed=True)], q, floor=0.35) is None


async def test_good_credits_only_what_the_answer_drew_on_and_names_no_source_file(pool, tmp_path):
    s1 = ScriptedLLM().say("Your sister Mara keeps three beehives behind the orchard. Confidence: 0.95",
                           "I could not say much about that. Confidence: 0.95")
    mind, _ = await _mind(pool, tmp_path, system1=s1)
    imports = [f"Imported note {i}: the {w} schedule for the {w} committee" for i, w in
               enumerate(["tram", "choir", "budget", "harbour", "chess", "library"])]
    await mind.store.store_many([NewMemory(t, source_tag="import") for t in imports])
    beehives = await mind.store.store(NewMemory("My sister Mara keeps three beehives behind the orchard."))

    await mind.loop.submit("user", "what does my sister keep?")
    await mind.loop.cycle()
    context = json.loads(await pool.fetchval("SELECT context_summary->'ids'->'situational' FROM thought_log "
                                             "ORDER BY id DESC LIMIT 1"))
    assert beehives in context and len(context) >= 4                   # the imports were in the context too
    reply = await feedback_command(pool, "", good=True, settings=OutcomeSettings(), now=T0)
    assert reply.startswith(f"recorded /good for the memories the last answer drew on: #{beehives} ")
    assert [r["memory_id"] for r in await pool.fetch("SELECT memory_id FROM memory_uses WHERE kind = 'good'")] == [
        beehives]
    assert "src/" not in reply

    # an answer that drew on none of its memories: nothing is credited, and the reply says why in words
    await mind.loop.submit("user", "what comes to mind about the committees?")
    await mind.loop.cycle()
    n = len(json.loads(await pool.fetchval("SELECT context_summary->'ids'->'situational' FROM thought_log "
                                           "ORDER BY id DESC LIMIT 1")))
    reply = await feedback_command(pool, "", good=True, settings=OutcomeSettings(), now=T0)
    assert reply == (f"the last answer drew on none of its {n} memories (none has enough of its own words in "
                     "the answer); nothing recorded; name a memory: /good <memory id>")
    assert "src/" not in reply and ".py" not in reply
    assert await pool.fetchval("SELECT count(*) FROM memory_uses WHERE kind = 'good'") == 1
    assert await pool.fetchval("SELECT count(*) FROM outcomes WHERE kind = 'feedback'") == 1


def test_about_the_self_is_the_minds_own_word_not_the_users_i():
    assert not about_self("external_user", None, "episodic", None, "I have a cat called Pimenta")
    assert not about_self("import", "Emi", "episodic", None, "Emi: I love the sea")       # another speaker's "I"
    assert about_self(SAID_TAG, None, "episodic", None, "I find I remember gardens best")
    assert about_self("import", "self", "episodic", None, "I keep coming back to the sea")  # speaker self
    assert not about_self(SAID_TAG, None, "episodic", None, "Pimenta is a lovely name for a cat.")
    assert not about_self("internal_consolidation", None, "semantic", None, "The user told me they are a nurse.")
    assert about_self("internal_system2", None, "reflection", None, "Answer dates in the user's own calendar.")
    assert about_self("external_user", None, "episodic", "value", "Be honest with people.")   # a value it holds


async def test_the_dmns_self_bias_picks_the_minds_own_memory_over_the_users_i_line(pool, tmp_path):
    mind, _ = await _mind(pool, tmp_path)
    user_i, mind_own = await mind.store.store_many([
        NewMemory("I walk by the sea every morning and I love it", alpha=9, beta=1),
        NewMemory("I notice I keep returning to the sea in my thoughts", source_tag=THOUGHT_TAG, alpha=9, beta=1)])
    rows = await dmn_repo.pool_rows(pool, np.random.default_rng(1), 400, datetime.now(UTC),
                                    mind.providers.embedder.model_name)
    assert [r["id"] for r in rows] == [user_i, mind_own]
    features = pool_features(rows)
    assert features.about_self.tolist() == [False, True]      # the user's "I" is about the user
    # alike in every other feature (weight, neglect, age, tension): the self bias draws the mind's own
    weights = bias_weights(features, SamplingBias())
    assert weights[1] > 2 * weights[0]
    rng = np.random.default_rng(7)
    first = [int(draw(weights, 1, rng)[0]) for _ in range(400)]
    assert first.count(1) > 2 * first.count(0)
