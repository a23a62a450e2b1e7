"""Attention allocation (plan §3.10) and the cognitive state report (§3.4)."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from src.loop.attention_queue import (
    DEFAULT_URGENCY,
    AttentionQueue,
    Candidate,
    Components,
    allocate,
    cognitive_state_report,
    compute_salience,
    decay_urgency,
    salience_components,
)
from src.loop.settings import AttentionSettings, SalienceWeights
from src.loop.turns import take_turn
from src.tokens import count_tokens

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
DIMS = 8


def basis(i: int) -> np.ndarray:
    v = np.zeros(DIMS)
    v[i] = 1.0
    return v


GOAL, CONTEXT, OTHER = basis(0), basis(1), basis(2)


def cand(source, text, *, emb=None, charge=0.0, at=0, **kw) -> Candidate:
    return Candidate.of(source, text, enqueued_at=T0 + timedelta(seconds=at), embedding=emb,
                        emotional_charge=charge, **kw)


def test_default_urgencies_and_tags() -> None:
    assert DEFAULT_URGENCY == {"user": 0.8, "dmn": 0.2, "gut": 0.4, "consolidation": 0.3, "scheduled": 0.6}
    c = cand("dmn", "a thought")
    assert (c.urgency, c.source_tag, c.source_confidence, c.label) == (0.2, "internal_dmn", 0.5, "DMN thought")
    u = cand("user", "hi")
    assert (u.urgency, u.source_tag, u.source_confidence) == (0.8, "external_user", 1.0)
    with pytest.raises(ValueError, match="unknown attention source 'email'"):
        cand("email", "x")


def test_salience_formula_components() -> None:
    c = cand("gut", "x", emb=0.6 * GOAL + 0.8 * CONTEXT, charge=0.5)
    comps = salience_components(c, [CONTEXT], [GOAL])
    assert comps == pytest.approx(Components(novelty=0.2, goal_relevance=0.6, emotional_charge=0.5, urgency=0.4))
    assert compute_salience(c, [CONTEXT], [GOAL]) == pytest.approx(0.3 * 0.2 + 0.3 * 0.6 + 0.2 * 0.5 + 0.2 * 0.4)
    # no context: fully novel; no goals: no goal relevance; opposed goal clipped to 0
    assert salience_components(c, None, None)[:2] == (1.0, 0.0)
    assert salience_components(cand("dmn", "x", emb=-GOAL), [], [GOAL]).goal_relevance == 0.0
    # no embedding: novelty unknown (0.5), no goal relevance
    assert salience_components(cand("dmn", "x"), [CONTEXT], [GOAL])[:2] == (0.5, 0.0)
    with pytest.raises(ValueError, match="candidate embedding has 3 dimensions, context vectors 8"):
        salience_components(cand("dmn", "x", emb=np.ones(3)), [CONTEXT], None)


def test_user_message_beats_dmn_thought_on_urgency() -> None:
    user = cand("user", "what about the deadline?", emb=OTHER, at=1)
    dmn = cand("dmn", "that bug from yesterday connects to the cache", emb=basis(3), at=0)
    result = allocate([dmn, user])
    assert result.winner is user
    assert [round(s.salience, 6) for s in result.ranked] == [0.46, 0.34]
    assert (result.decisive, result.reason) == ("urgency", "urgency bias applied")
    assert result.losers == [decay_urgency(dmn, 0.8, 0.05)]
    assert result.losers[0].urgency == pytest.approx(0.16)


def test_inflated_dmn_emotional_charge_wins() -> None:
    user = cand("user", "what about the deadline?", emb=OTHER, at=1)
    dmn = cand("dmn", "contradiction about my core value", emb=basis(3), charge=1.0, at=0)
    result = allocate([user, dmn])
    assert result.winner is dmn
    assert [round(s.salience, 6) for s in result.ranked] == [0.54, 0.46]
    assert (result.decisive, result.reason) == ("emotional_charge", "emotional charge")
    assert cognitive_state_report(result) == (
        "[COGNITIVE STATE]\n"
        "Attention candidates this cycle:\n"
        '  - DMN thought: "contradiction about my core value" (salience: 0.54)\n'
        '  - User message: "what about the deadline?" (salience: 0.46)\n'
        "Winner: DMN thought (emotional charge)")


def test_state_report_is_the_plans_example() -> None:
    user = cand("user", "what about X?", emb=GOAL, charge=0.3, at=2)
    dmn = cand("dmn", "contradiction about Y", emb=GOAL, charge=0.05, at=0)
    gut = cand("gut", "mild delta on Z", emb=0.5 * CONTEXT + np.sqrt(0.75) * OTHER, charge=0.4, at=1)
    result = allocate([gut, dmn, user], recent_context_vecs=[CONTEXT], goal_vecs=[GOAL])
    assert [(s.candidate.source, round(s.salience, 6)) for s in result.ranked] == [
        ("user", 0.82), ("dmn", 0.65), ("gut", 0.31)]
    report = cognitive_state_report(result)
    assert report == (
        "[COGNITIVE STATE]\n"
        "Attention candidates this cycle:\n"
        '  - User message: "what about X?" (salience: 0.82)\n'
        '  - DMN thought: "contradiction about Y" (salience: 0.65)\n'
        "  - Gut signal: mild delta on Z (salience: 0.31)\n"
        "Winner: User message (urgency bias applied)")
    assert result.candidates_json()[0] == {
        "id": None, "source": "user", "source_tag": "external_user", "text": "what about X?",
        "salience": 0.82, "components": {"novelty": 1.0, "goal_relevance": 1.0, "emotional_charge": 0.3,
                                         "urgency": 0.8}, "won": True}


@pytest.mark.parametrize(("winner_kw", "loser_kw", "decisive", "reason"), [
    ({"emb": GOAL}, {"emb": OTHER}, "goal_relevance", "goal relevance"),
    ({"emb": OTHER}, {"emb": CONTEXT}, "novelty", "novelty"),
])
def test_winner_reason_names_the_deciding_component(winner_kw, loser_kw, decisive, reason) -> None:
    a, b = cand("dmn", "a", at=1, **winner_kw), cand("dmn", "b", at=0, **loser_kw)
    result = allocate([b, a], [CONTEXT], [GOAL])
    assert (result.winner, result.decisive, result.reason) == (a, decisive, reason)
    assert cognitive_state_report(result).endswith(f"Winner: DMN thought ({reason})")


def test_ties_are_broken_by_source_then_age_then_id() -> None:
    # user 0.3·1 + 0.2·0.6 = 0.42 = scheduled with a 0.6 urgency too
    user = cand("user", "u", emb=OTHER, urgency=0.6, at=5)
    sched = cand("scheduled", "s", emb=OTHER, at=0)
    result = allocate([sched, user])
    assert (result.winner, result.reason, result.decisive) == (user, "tie, broken by source priority", None)
    old, new = cand("dmn", "old", emb=OTHER, at=0), cand("dmn", "new", emb=OTHER, at=9)
    assert allocate([new, old]).winner is old
    assert allocate([new, old]).reason == "tie, broken by arrival order"


def test_only_and_no_candidates() -> None:
    only = allocate([cand("gut", "a flicker")])
    assert (only.reason, only.losers) == ("only candidate", [])
    assert cognitive_state_report(only).endswith("Winner: Gut signal (only candidate)")
    empty = allocate([])
    assert empty.winner is None
    assert cognitive_state_report(empty) == (
        "[COGNITIVE STATE]\nAttention candidates this cycle:\n  (none)\nWinner: none (nothing pending)")


def test_decay_has_a_floor() -> None:
    c = cand("dmn", "x")
    for expected in (0.16, 0.128, 0.1024):
        c = decay_urgency(c, 0.8, 0.05)
        assert c.urgency == pytest.approx(expected)
    for _ in range(20):
        c = decay_urgency(c, 0.8, 0.05)
    assert c.urgency == 0.05
    # a candidate that started below the floor is not raised to it
    assert decay_urgency(cand("dmn", "x", urgency=0.01), 0.8, 0.05).urgency == 0.01


def test_queue_keeps_losers_with_decayed_urgency_and_reevaluates_them() -> None:
    q = AttentionQueue()
    user = q.push(cand("user", "what about the deadline?", emb=OTHER, at=1))
    assert user is None
    q.push(cand("dmn", "contradiction about my core value", emb=basis(3), charge=1.0, at=0))
    first = q.allocate()
    assert first.winner.source == "dmn" and first.winner.id == 2
    assert [(c.source, c.id, round(c.urgency, 6)) for c in q.pending()] == [("user", 1, 0.64)]
    second = q.allocate([basis(3)])
    assert (second.winner.source, second.reason) == ("user", "only candidate")
    assert len(q) == 0 and q.allocate() is None


def test_queue_drops_oldest_lowest_impulse_and_never_a_user_message() -> None:
    q = AttentionQueue(AttentionSettings(queue_max=3))
    q.push(cand("user", "u1", at=0, urgency=0.01))
    q.push(cand("dmn", "d-old", at=1))
    q.push(cand("gut", "g", at=2))
    evicted = q.push(cand("dmn", "d-new", at=3))
    assert evicted.text == "d-old"          # lowest urgency (0.2), oldest of the two DMN thoughts
    assert [c.text for c in q.pending()] == ["u1", "g", "d-new"]
    assert q.counts() == {"user": 1, "scheduled": 0, "gut": 1, "consolidation": 0, "dmn": 1}
    assert q.dropped == {"user": 0, "scheduled": 0, "gut": 0, "consolidation": 0, "dmn": 1}
    users = AttentionQueue(AttentionSettings(queue_max=2))
    for i, u in enumerate((0.8, 0.3, 0.5)):
        assert users.push(cand("user", f"u{i}", at=i, urgency=u)) is None
    assert [c.text for c in users.pending()] == ["u0", "u1", "u2"]   # past queue_max: never evicted
    assert users.dropped["user"] == 0
    assert users.push(cand("dmn", "d", at=4)) is not None            # an impulse is the one dropped
    assert [c.text for c in users.take("user", 2)] == ["u0", "u1"]
    assert [c.text for c in users.pending()] == ["u2"]


def test_long_texts_are_flattened_and_cut_in_the_report() -> None:
    text = "line one\n\n" + "word " * 40
    result = allocate([cand("user", text)])
    line = cognitive_state_report(result).splitlines()[2]
    quoted = line.split('"')[1]
    assert len(quoted) <= 80 and quoted.endswith("…") and "\n" not in quoted
    assert quoted.startswith("line one word word")


def test_report_stays_within_its_token_budget() -> None:
    rng = np.random.default_rng(3)
    many = [cand(random.Random(i).choice(["dmn", "gut", "consolidation"]),
                 f"thought number {i} about something rather long and detailed " * 3,
                 emb=rng.standard_normal(DIMS), at=i) for i in range(40)]
    result = allocate(many, [CONTEXT], [GOAL])
    report = cognitive_state_report(result)
    assert count_tokens(report) <= 200
    lines = report.splitlines()
    assert lines[-1].startswith("Winner: ")
    assert lines[-2].startswith("  - … ") and " more, salience " in lines[-2]
    shown = sum(1 for ln in lines if ln.startswith("  - ") and "… " not in ln[:6])
    assert f"… {40 - shown} more" in lines[-2]


def test_salience_weights_must_sum_to_one() -> None:
    with pytest.raises(ValidationError, match="attention.weights must sum to 1, they sum to 1.1"):
        SalienceWeights(novelty=0.4)
    with pytest.raises(ValidationError, match=r"attention.urgency.user must be in \[0, 1\]"):
        AttentionSettings(urgency={"user": 1.5})


unit = st.floats(0.0, 1.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "dmn", "gut", "consolidation", "scheduled"]),
                          unit, unit, st.integers(0, 3)), min_size=1, max_size=8),
       st.randoms(use_true_random=False))
def test_allocation_properties(specs, shuffler) -> None:
    cands = [cand(src, f"c{i}", emb=basis(b) + 0.1 * basis(4), charge=charge, urgency=urg, at=i)
             for i, (src, charge, urg, b) in enumerate(specs)]
    result = allocate(cands, [CONTEXT], [GOAL])
    saliences = [s.salience for s in result.ranked]
    assert all(0.0 <= s <= 1.0 for s in saliences)
    assert result.ranked[0].salience == pytest.approx(max(saliences))
    assert len(result.losers) == len(cands) - 1
    shuffled = list(cands)
    shuffler.shuffle(shuffled)
    assert allocate(shuffled, [CONTEXT], [GOAL]).winner is result.winner


def test_a_turn_takes_together_only_messages_of_the_winners_channel() -> None:
    """One reply goes back to one channel: a terminal line never rides in an API message's turn."""
    queue = AttentionQueue()
    first = queue.stamp(replace(cand("user", "from the API", at=0), channel="api"))
    terminal = [queue.stamp(cand("user", f"typed {i}", at=i)) for i in (1, 2)]
    other_api = queue.stamp(replace(cand("user", "API again", at=3), channel="api"))
    for c in (*terminal, other_api):
        queue.push(c)
    turn = take_turn(first, queue, max_messages=8)
    assert [p.text for p in turn.parts] == ["from the API", "API again"]
    assert turn.candidate.channel == "api"
    left = take_turn(queue.take("user", 1)[0], queue, max_messages=8)
    assert [p.text for p in left.parts] == ["typed 1", "typed 2"] and left.candidate.channel == "terminal"
