"""Issue 11 item 10: the loop sets the §3.6 always-escalate triggers from what the cycle knows."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from src.loop.triggers import cycle_triggers
from src.recall.store import NewMemory
from tests.fakes_llm import ScriptedLLM
from tests.test_loop import CONFIDENT, _mind


def _hit(similarity, *, alpha=1.0, beta=1.0, immutable=False, **metadata):
    return SimpleNamespace(hit=SimpleNamespace(similarity=similarity, alpha=alpha, beta=beta, immutable=immutable,
                                               metadata=metadata))


def _fired(*hits, kinds=(), focus=None, goals=()):
    trig = cycle_triggers(SimpleNamespace(memories=list(hits)), offered_kinds=kinds, focus_vec=focus,
                          goal_vecs=list(goals), touch_similarity=0.75, identity_center=0.8)
    return trig.fired()


def test_each_trigger_comes_from_what_the_cycle_knows():
    assert _fired(_hit(0.9), _hit(0.2, alpha=9.0, immutable=True), kinds=["read_doc", "internal"]) == []
    assert _fired(_hit(0.3, flag="contradiction")) == ["contradiction"]
    assert _fired(_hit(0.3, contradicts=[4])) == ["contradiction"]
    assert _fired(kinds=["read_doc", "external_effect"]) == ["irreversibility"]
    assert _fired(_hit(0.8, immutable=True)) == ["identity_touched"]
    assert _fired(_hit(0.8, alpha=8.0, beta=2.0)) == ["identity_touched"]       # identity tier: center 0.8
    assert _fired(_hit(0.8, alpha=7.0, beta=3.0)) == []                         # center 0.7: not identity
    assert _fired(_hit(0.8, kind="goal")) == ["goal_modification"]
    assert _fired(_hit(0.7, kind="goal")) == []                                 # recalled, not touched
    goal = np.array([1.0, 0.0, 0.0])
    assert _fired(focus=np.array([3.0, 1.0, 0.0]), goals=[goal]) == ["goal_modification"]   # cos 0.949
    assert _fired(focus=np.array([1.0, 1.0, 0.0]), goals=[goal]) == []                      # cos 0.707
    assert cycle_triggers(None, offered_kinds=[], focus_vec=None, goal_vecs=[], touch_similarity=0.75,
                          identity_center=0.8).fired() == []


async def test_an_input_touching_a_goal_goes_to_system2_even_when_system1_is_confident(pool, tmp_path):
    s1 = ScriptedLLM().say(CONFIDENT)
    s2 = ScriptedLLM(model="scripted-2").answer_structured({
        "answer": "Shall I drop the lighthouse goal? Tell me why first.", "explanation": "a goal changes",
        "needed_correction": False, "error_type": "", "correction_pattern": ""})
    mind, delivered = await _mind(pool, tmp_path, system1=s1, system2=s2)
    text = "finish restoring the lighthouse by spring"
    await mind.store.store(NewMemory(text, metadata={"kind": "goal"}))
    await mind.loop.submit("user", text)
    record = await mind.loop.cycle()
    assert (record.escalated, record.path) == (True, "system2")
    assert delivered == ["Shall I drop the lighthouse goal? Tell me why first."]
    row = await pool.fetchrow("SELECT triggers, reason FROM escalations")
    assert row["reason"] == "always-escalate trigger: goal_modification"
    assert "goal_modification" in row["triggers"]
