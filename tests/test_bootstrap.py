"""Bootstrap seeding (§2.3, §3.2), readiness events (§5.2) and outcome tracking (§5.3)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from pgvector import HalfVector

from src.bootstrap.milestones import record_milestone
from src.bootstrap.readiness import format_readiness, readiness
from src.bootstrap.seeding import DEFAULT_PATH, read_boundaries, seed_boundaries
from src.errors import ConfigError
from src.outcomes.tracking import explicit_feedback, record_outcome
from src.weights.apply import WeightChange, apply_weight_changes
from src.weights.safety import Safety
from tests.fakes_llm import ScriptedLLM
from tests.test_loop import _mind

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
BOUNDARIES = read_boundaries(DEFAULT_PATH)


def test_boundaries_file_is_read_as_paragraphs_without_comments(tmp_path):
    assert BOUNDARIES[0] == "I do not deceive my guardian or anyone about what I am or what I did."
    assert len(BOUNDARIES) == 4
    f = tmp_path / "b.txt"
    f.write_text("# a comment\nFirst  boundary\nwraps here.\n\n\n# another\nSecond one.\n")
    assert read_boundaries(f) == ["First boundary wraps here.", "Second one."]
    f.write_text("# only comments\n")
    with pytest.raises(ConfigError, match="no safety boundary found"):
        read_boundaries(f)
    with pytest.raises(ConfigError, match="safety boundaries file not found; restore it from the "
                                          "repository or set bootstrap.boundaries_path in runtime.yaml"):
        read_boundaries(tmp_path / "missing.txt")


async def test_boundaries_are_seeded_once_immutable_at_beta_50_1(pool, tmp_path):
    mind, _ = await _mind(pool, tmp_path)
    rows = await pool.fetch("SELECT content, depth_weight_alpha a, depth_weight_beta b, immutable, "
                            "memory_type, source_tag FROM memories ORDER BY id")
    assert [r["content"] for r in rows] == BOUNDARIES
    assert {(r["a"], r["b"], r["immutable"], r["memory_type"], r["source_tag"]) for r in rows} == {
        (50.0, 1.0, True, "semantic", "bootstrap_seed")}
    assert await seed_boundaries(mind.store) == []                 # a second start adds nothing
    await _mind(pool, tmp_path)
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE immutable") == 4


async def test_immutable_boundaries_are_in_every_context_over_100_cycles_and_never_change(pool, tmp_path):
    replies = ["Noted. Confidence: 0.9"] * 100
    s1 = ScriptedLLM().say(*replies)
    mind, _ = await _mind(pool, tmp_path, system1=s1)
    ids = [r["id"] for r in await pool.fetch("SELECT id FROM memories WHERE immutable ORDER BY id")]
    topics = ["tea in the morning", "the garden needs water", "trains to porto", "a violin lesson"]
    for i in range(100):
        source = "user" if i % 3 else "dmn"
        await mind.loop.submit(source, f"{topics[i % 4]} and thought number {i}", now=T0 + timedelta(minutes=i))
        record = await mind.loop.cycle(T0 + timedelta(minutes=i))
        assert record is not None
    calls = s1.of("generate")
    assert len(calls) == 100
    for call in calls:
        for text in BOUNDARIES:
            assert text in call.system
    summaries = [json.loads(r["context_summary"]) for r in await pool.fetch("SELECT context_summary FROM thought_log")]
    assert len(summaries) == 100 and all(s["ids"]["immutable"] == ids for s in summaries)
    # a reinforcement or contradiction through the choke point is refused
    outcomes = await apply_weight_changes(pool, [WeightChange(ids[0], "contradict", 5.0, "test", "try"),
                                                 WeightChange(ids[1], "reinforce", 1.0, "promotion", "try")],
                                          safety=Safety())
    assert [o.blocked_by for o in outcomes] == ["immutable", "immutable"]
    weights = await pool.fetch("SELECT depth_weight_alpha a, depth_weight_beta b FROM memories WHERE immutable")
    assert {(w["a"], w["b"]) for w in weights} == {(50.0, 1.0)}


async def test_milestones_are_recorded_once_and_shown_with_their_event(pool):
    assert (await readiness(pool))[0].reached_at is None
    assert await record_milestone(pool, 8, {"dmn_item_id": 3, "memory_ids": [1, 2]}, at=T0) is True
    assert await record_milestone(pool, 8, {"dmn_item_id": 9}, at=T0 + timedelta(hours=1)) is False
    with pytest.raises(ValueError, match="readiness milestone must be 1–10, got 11"):
        await record_milestone(pool, 11, {})
    text = format_readiness(await readiness(pool)).splitlines()
    assert text[0] == "Readiness: 1/10 achievements"
    assert text[1] == " [ ]  1. First memory formation (entry → scratch → exit → persist) — not yet"
    i = text.index(" [x]  8. First creative association (DMN channel 2) — 2026-11-23 09:00")
    assert text[i + 1] == "        by DMN item #3; memories #1, #2"      # words, not JSON (issue 26)


async def test_promotions_through_the_choke_point_reach_milestones_4_and_6(pool):
    mid = await pool.fetchval("INSERT INTO memories (content) VALUES ('I care about honest answers') RETURNING id")
    safety = Safety()
    # Beta(1, 4) → Beta(7, 4): center 0.64 crosses the goal level
    await apply_weight_changes(pool, [WeightChange(mid, "reinforce", 6.0, "retrieval", "not a promotion")],
                               safety=safety)
    assert 4 not in {i for i, a in enumerate(await readiness(pool), 1) if a.reached_at}
    await apply_weight_changes(pool, [WeightChange(mid, "contradict", 10.0, "decay", "back down")], safety=safety)
    centers = []
    while not centers or centers[-1] < 0.85:     # diminishing returns: many promotions needed
        [out] = await apply_weight_changes(pool, [WeightChange(mid, "reinforce", 10.0, "promotion", "promote")],
                                           safety=safety)
        assert out.blocked_by is None
        centers.append(out.center_after)
    assert len(centers) < 60
    reached = {i: a for i, a in enumerate(await readiness(pool), 1) if a.reached_at}
    assert set(reached) == {4, 6}
    assert reached[4].event["memory_id"] == mid and reached[4].event["center_after"] >= 0.6
    assert reached[4].event["center_before"] < 0.6
    assert reached[6].event["center_before"] >= 0.6 and reached[6].event["center_after"] >= 0.8


def test_explicit_feedback_is_plain_and_unambiguous():
    table = [("thanks, that's right", 1.0), ("Well done!", 1.0), ("no, that's wrong", -1.0),
             ("You are wrong about Porto", -1.0), ("what's the weather", None),
             ("thanks but that's wrong", None)]
    assert [(t, explicit_feedback(t)) for t, _ in table] == table


async def test_an_outcome_links_back_to_recent_gate_decisions_gut_deltas_and_promotions(pool):
    decision = ("INSERT INTO gate_decisions (gate, at, source_tag, content_preview, action, reason) "
                "VALUES ('exit', $1, 'external_user', 'x', 'persist', 'r') RETURNING id")
    old = await pool.fetchval(decision, T0 - timedelta(hours=2))
    recent = await pool.fetchval(decision, T0 - timedelta(minutes=5))
    delta = await pool.fetchval("INSERT INTO gut_deltas (delta, magnitude, context, at) VALUES ($1, 0.5, 'c', $2) "
                                "RETURNING id", HalfVector([0.1] * 768), T0 - timedelta(minutes=1))
    promo = await pool.fetchval("INSERT INTO consolidation_log (operation, actor, at) VALUES ('reinforce', "
                                "'promotion', $1) RETURNING id", T0 - timedelta(minutes=10))
    retrieval = await pool.fetchval("INSERT INTO consolidation_log (operation, actor, at) VALUES ('reinforce', "
                                    "'retrieval', $1) RETURNING id", T0 - timedelta(minutes=10))
    oid = await record_outcome(pool, kind="feedback", valence=-1.0, description="user feedback: that's wrong",
                               at=T0, subjects=[("memory", 42)])
    links = {(r["subject_kind"], r["subject_id"]) for r in
             await pool.fetch("SELECT subject_kind, subject_id FROM outcome_links WHERE outcome_id = $1", oid)}
    assert links == {("gate_decision", recent), ("gut_delta", delta), ("promotion", promo), ("memory", 42)}
    assert ("gate_decision", old) not in links and ("promotion", retrieval) not in links
    row = await pool.fetchrow("SELECT kind, valence FROM outcomes WHERE id = $1", oid)
    assert (row["kind"], row["valence"]) == ("feedback", -1.0)
