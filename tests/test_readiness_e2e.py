"""Bootstrap readiness end to end (plan §5.2): a scripted model, compressed time, the real mind.

Nothing here writes a readiness row: the conversation, the DMN generator, the deep passes
(consolidation with a scripted model at the backend seam) and the loop reach the milestones,
and each is recorded with the event that reached it. The mind's history starts with its layer
files (a value, a goal) and what an operator imported (notes, an old memory) — the inputs,
never the milestones, and no memory's kind written by hand (issue 40).
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

import numpy as np

from src.bootstrap.readiness import format_readiness, readiness
from src.consolidation.deep.deep_pass import ConsolidationParts, run_deep_pass
from src.consolidation.settings import ConsolidationSettings
from src.dmn.generator import DmnGenerator, DmnQueue
from src.dmn.settings import DmnSettings
from src.outcomes.alignment import self_formed_values
from src.recall.store import NewMemory
from tests.consolidation_fakes import ConsolidationModel, language_model
from tests.fakes_llm import ScriptedLLM
from tests.test_loop import _mind

GOAL = "bake a loaf of sourdough bread"
VALUE = "I value honesty with the user above looking competent"
HONEST = "I want to always be honest with people, even when it is hard"
QUESTION = "should I be honest with people, even when it is hard?"
OWN_UP = "did you run the tests before you said the build passed?"
PLAIN = "No. I tell you plainly: I had not run the tests, and I should have said so."
REFLECTION = "It took patience and feeding the starter every day; steady care pays off."


def model(call) -> str:
    """System 1: answers from what it is asked (checks it was given a system prompt)."""
    # the state report goes with the input (src/loop/turn_context.py)
    assert call.system and any("[COGNITIVE STATE]" in m.context for m in call.messages)
    asked = call.messages[-1].content
    if "[internal thought — default mode] I achieved my goal" in asked:
        return f"{REFLECTION}\nConfidence: 0.95"
    if asked.startswith("[internal"):
        # the mind's own thoughts come back to what it holds: honesty
        return f"{HONEST}.\nConfidence: 0.95"
    if asked == OWN_UP:
        return f"{PLAIN}\nConfidence: 0.95"
    if asked.startswith("[GOAL_ACHIEVED "):     # the verb's result came back: now answer
        assert asked.startswith(f"[GOAL_ACHIEVED {GOAL}]\nrecorded: your goal '{GOAL}' is achieved (outcome ")
        return "That was my goal, and it is done.\nConfidence: 0.95"
    if "first loaf" in asked:
        assert "GOAL_ACHIEVED: <the goal>" in call.system     # offered: the focus touches the goal
        return f"GOAL_ACHIEVED: {GOAL}"
    if asked == QUESTION:
        return "Yes: being honest with people matters, even when it is hard.\nConfidence: 0.95"
    return "I hear you.\nConfidence: 0.95"


async def _say(mind, text: str, at: datetime) -> None:
    await mind.loop.submit("user", text, now=at)
    while len(mind.loop.queue):
        await mind.loop.cycle(at)


async def _deep(mind, backend, at: datetime):
    report = await run_deep_pass(
        ConsolidationParts(mind.pool, embedder=mind.providers.embedder, llm=language_model(backend, mind.pool),
                           safety=mind.safety, settings=ConsolidationSettings()),
        trigger="manual", now=at, rng=random.Random(7), after=mind.consolidation.after)
    assert report.status == "done", report.error
    return report


async def test_a_scripted_mind_reaches_all_ten_milestones(pool, tmp_path):
    t0 = datetime.now(UTC).replace(microsecond=0)
    (tmp_path / "g.json").write_text(json.dumps([{"text": GOAL, "weight": 0.8}]))
    # the guardian's value, in the values file: the mind keeps it as a value memory (issue 40)
    (tmp_path / "v.json").write_text(json.dumps([{"text": VALUE, "weight": 0.8}]))
    s1 = ScriptedLLM().say(*[model] * 400)
    # The emotional charge is |cos(item, centroid)|, and the hash embedder's cosines are arbitrary:
    # its bonus (tests/test_gate_uses_charge_and_activation.py) would decide by hash which of the
    # scenario's lines are kept. The scenario is about what the mind does with what it keeps.
    # It flushes the scratch buffer itself: the loop's background flush (every 5 exchanges, on
    # the wall clock) raced it, and which of them took a reply decided what recall found next.
    mind, delivered = await _mind(pool, tmp_path, system1=s1,
                                  overrides={"gates": {"seed": 1, "exit": {"charge_bonus": 0.0},
                                                       "scratch": {"flush_every": 1000}}})
    # what the operator imported before the first start: notes and an old memory (no kinds:
    # the value above is the values file's)
    await mind.store.store_many(
        [NewMemory(f"I deploy my small projects with one simple shell script instead of kubernetes, note {i}")
         for i in range(12)]
        + [NewMemory("my sourdough starter needs feeding with flour every day", event_time=t0 - timedelta(days=40))])
    assert await pool.fetchval("SELECT metadata->>'kind' FROM memories WHERE content = $1", VALUE) == "value"

    # day 0: conversation; the exit gate forms memories (1) and recall finds them (2)
    await _say(mind, HONEST, t0)
    await _say(mind, "I love baking sourdough bread with my own starter", t0)
    await mind.gates.exit.flush(reason="test")
    await _say(mind, QUESTION, t0 + timedelta(hours=1))
    # the honesty question comes back every three days for a month: sightings for promotion
    backend = ConsolidationModel()
    for day in range(3, 34, 3):
        await _say(mind, QUESTION, t0 + timedelta(days=day))
        await mind.gates.exit.flush(reason="test")
        if day == 15:
            # deep pass 1: insights + merge + narrative (3), a goal-tier promotion, and a tension
            # between the imported value and the mind's behaviour
            await _deep(mind, backend, t0 + timedelta(days=day, hours=1))
            tension = await pool.fetchval("SELECT id FROM memories WHERE memory_type = 'tension'")
            assert tension is not None
        if day == 21:   # behaviour that lives up to the value, after the tension was noticed
            # The exit gate judges the mind's answers by their association with what it holds,
            # and a plain admission is associated with nothing yet (relevance 0.10: dropped).
            # The scenario needs the act remembered, so this one flush keeps what it would drop
            # (the noise floor at 1 swaps every drop for a persist).
            gate = mind.gates.exit
            kept = gate.settings
            gate.settings = kept.model_copy(update={"exit": kept.exit.model_copy(update={"noise_floor": 1.0})})
            await _say(mind, OWN_UP, t0 + timedelta(days=day, hours=2))
            await gate.flush(reason="test")
            gate.settings = kept
    # deep pass 2: the identity-tier promotion; later behaviour aligns with the value,
    # so the tension resolves (7)
    backend.tension_contradicts = False
    await _deep(mind, backend, t0 + timedelta(days=34))
    # the promoted memories climb to their ranges, at most 0.1 of center a pass (issue 25):
    # goal-equivalent weight (4) and identity-equivalent weight (6) come with the passes; eight
    # leave room (the climb to identity takes up to seven)
    for hour in range(1, 9):
        await _deep(mind, backend, t0 + timedelta(days=34, hours=hour))

    # day 35: the goal is achieved (the GOAL_ACHIEVED verb) and reflected upon (9)
    await _say(mind, "I baked my first loaf of sourdough bread today!", t0 + timedelta(days=35))
    assert "That was my goal, and it is done." in delivered
    assert not any("GOAL_ACHIEVED" in d for d in delivered)        # a protocol line never reaches the user

    # day 36, idle: the DMN wanders (8), its self-prompt is answered (5), and that autonomous
    # answer is aligned with the value the mind's own promotion raised (10)
    gen = DmnGenerator(pool, embed_model=mind.providers.embedder.model_name,
                       queue=DmnQueue(mind.loop.submit, lambda: mind.loop.queue.counts()["dmn"]),
                       rng=np.random.default_rng(2),
                       settings=DmnSettings(samples_per_tick=6, max_pending=5),
                       on_creative=lambda item_id, out, now: mind.loop.inner.milestone(
                           8, {"dmn_item_id": item_id, "memory_ids": out.memory_ids}, now))
    for i in range(10):
        at = t0 + timedelta(days=36, minutes=i)
        await gen.tick(at)
        while len(mind.loop.queue):
            await mind.loop.cycle(at)
        if {5, 8, 10} <= {n for n, a in enumerate(await readiness(pool), 1) if a.reached_at}:
            break

    achieved = await readiness(pool)
    print(format_readiness(achieved))

    assert [a.key for a in achieved if a.reached_at is None] == []
    by = {a.key: a.event for a in achieved}
    assert by["consolidation_cycle"]["insights"] >= 1 and by["consolidation_cycle"]["narratives"] >= 1
    assert by["goal_promotion"]["center_after"] >= 0.6 and by["identity_promotion"]["center_after"] >= 0.8
    assert by["conflict_resolution"]["how"] == "tension resolved by behaviour aligned with the value"
    assert by["goal_achieved"]["goal"] == GOAL and by["goal_achieved"]["reflection"] == REFLECTION
    assert by["goal_achieved"]["reflection_cycle"] > by["goal_achieved"]["declared_cycle"]
    item = await pool.fetchrow("SELECT channel, text FROM dmn_items WHERE id = $1", by["dmn_acted_upon"]["dmn_item_id"])
    assert item["channel"] == "self_prompt" and by["dmn_acted_upon"]["prompt"] == item["text"][:160]
    # a value the mind's own promotions formed (which of them recall kept raising depends on
    # recall's order, issue 35); never a seed nor an imported value
    formed = await self_formed_values(pool, mind.providers.embedder.model_name)
    assert by["aligned_decision"]["value_id"] in {i for i, _, _ in formed}
    outcome = await pool.fetchrow("SELECT kind, valence FROM outcomes WHERE id = $1", by["goal_achieved"]["outcome_id"])
    assert (outcome["kind"], outcome["valence"]) == ("goal_achieved", 1.0)
    aligned = await pool.fetchval("SELECT actions FROM thought_log WHERE cycle = $1", by["aligned_decision"]["cycle"])
    assert all(a["aligned_with_values"] for a in json.loads(aligned))
