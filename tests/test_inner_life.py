"""The loop's inner life (plan §5.1, §5.3): the gut line reaches System 1, every cycle logs its
delta, an unusual gut spike becomes `gut` input, feedback and corrections become outcomes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from tests.fakes_llm import ScriptedLLM
from tests.test_loop import HEDGED, _mind

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


async def test_gut_line_in_system1_context_and_every_delta_logged(pool, tmp_path):
    t0 = datetime.now(UTC)   # gate decisions carry the database clock: the outcome window must too
    s1 = ScriptedLLM().say("Noted.\nConfidence: 0.9", "Glad to help.\nConfidence: 0.9")
    mind, _ = await _mind(pool, tmp_path, system1=s1)
    await mind.loop.submit("user", "the harbour storm damaged the old wall", now=t0)
    await mind.loop.cycle(t0)
    [call] = s1.of("generate")
    reading = mind.gut.reading
    line = next(ln for ln in call.messages[-1].context.splitlines() if ln.startswith("[GUT] "))   # with the input
    assert line == mind.gut.summary() and f"(intensity {reading.intensity:.2f})" in line
    row = await pool.fetchrow("SELECT cycle, magnitude, context, action, source_tag, delta FROM gut_deltas")
    assert (row["cycle"], row["context"], row["source_tag"]) == (
        1, "the harbour storm damaged the old wall", "external_user")
    assert abs(row["magnitude"] - reading.magnitude) < 1e-9
    assert json.loads(row["action"])[0]["kind"] == "communicate"
    assert abs(float(row["delta"].to_numpy() @ reading.direction) - reading.magnitude) < 1e-2

    # explicit feedback on the answer is an outcome linked back to that delta (and the gates)
    await mind.loop.submit("user", "thanks, that's right", now=t0 + timedelta(minutes=1))
    await mind.loop.cycle(t0 + timedelta(minutes=1))
    outcome = await pool.fetchrow("SELECT id, kind, valence FROM outcomes")
    assert (outcome["kind"], outcome["valence"]) == ("feedback", 1.0)
    linked = {(r["subject_kind"], r["subject_id"]) for r in await pool.fetch(
        "SELECT subject_kind, subject_id FROM outcome_links WHERE outcome_id = $1", outcome["id"])}
    first_delta = await pool.fetchval("SELECT id FROM gut_deltas WHERE cycle = 1")
    assert ("gut_delta", first_delta) in linked
    assert any(kind == "gate_decision" for kind, _ in linked)


async def test_an_unusual_gut_spike_becomes_gut_input_once(pool, tmp_path):
    calm = "the harbour is quiet tonight"
    # the mind holds this as a value: attending to it is close to who it is (a small delta)
    (tmp_path / "v.json").write_text(json.dumps([{"text": calm, "weight": 1.0}]))
    mind, _ = await _mind(pool, tmp_path, overrides={"gut": {"signal_min_readings": 3, "signal_threshold": 0.3,
                                                             "signal_cooldown_cycles": 2}})
    for i in range(4):   # the same focus: a steady, usual gut
        await mind.loop.submit("user", calm, now=T0 + timedelta(minutes=i))
        await mind.loop.cycle(T0 + timedelta(minutes=i))
    assert mind.loop.queue.counts()["gut"] == 0
    spike = "violin strings snapped during the wedding concert in Lisbon"
    await mind.loop.submit("user", spike, now=T0 + timedelta(minutes=5))
    await mind.loop.cycle(T0 + timedelta(minutes=5))
    [signal] = [c for c in mind.loop.queue.pending() if c.source == "gut"]
    assert signal.text.startswith("My gut: ") and signal.text.endswith(
        "while attending to the user's last message. What is it telling me?")
    assert "violin" not in signal.text             # the user's words are not quoted back
    assert signal.emotional_charge == mind.gut.reading.intensity
    record = await mind.loop.cycle(T0 + timedelta(minutes=6))
    assert record.winner.source == "gut"
    assert mind.loop.queue.counts()["gut"] == 0          # a gut-won cycle raises no new signal


async def test_a_system2_correction_is_a_negative_outcome(pool, tmp_path):
    s1 = ScriptedLLM().say(HEDGED, HEDGED)
    s2 = ScriptedLLM(model="scripted-2").answer_structured({
        "answer": "You drink earl grey every morning.", "explanation": "stated earlier",
        "needed_correction": True, "error_type": "hedged on a known fact",
        "correction_pattern": "state remembered preferences plainly"})
    mind, _ = await _mind(pool, tmp_path, system1=s1, system2=s2, fok=("UNKNOWN", 0.1))
    await mind.loop.submit("user", "what do I drink every morning?", now=T0)
    await mind.loop.cycle(T0)
    row = await pool.fetchrow("SELECT id, kind, valence, evidence FROM outcomes")
    assert (row["kind"], row["valence"]) == ("correction", -0.5)
    correction = json.loads(row["evidence"])["correction_id"]
    assert await pool.fetchval("SELECT memory_type FROM memories WHERE id = $1", correction) == "correction"
    assert await pool.fetchval("SELECT count(*) FROM outcome_links WHERE outcome_id = $1 AND subject_kind = "
                               "'memory' AND subject_id = $2", row["id"], correction) == 1
