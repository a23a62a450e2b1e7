"""The DMN (plan §4.7): biased sampling, channels, review prompts, suppression, the entropy
guard, and its items competing in the one attention queue (real loop, real database)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from src.dmn.channels import review_prompt
from src.dmn.entropy_guard import EntropyGuard
from src.dmn.generator import DmnGenerator, DmnLimits, DmnQueue
from src.dmn.sampling import PoolFeatures, bias_weights, draw
from src.dmn.settings import DmnSettings, SamplingBias
from src.dmn.settings import EntropyGuardSettings as GuardSettings
from src.dmn.suppression import activity
from src.recall.store import NewMemory
from tests.test_loop import _mind

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_bias_weights_follow_the_settings():
    f = PoolFeatures(center=np.array([0.9, 0.2, 0.2, 0.9, 0.2]), hours_unseen=np.array([1e6, 0, 0, 0, 0]),
                     age_days=np.array([0, 0, 60, 0, 0]), tension=np.array([0, 1, 0, 0, 0], bool),
                     about_self=np.array([0, 0, 0, 1, 0], bool))
    w = bias_weights(f, SamplingBias())
    assert np.allclose(w, [1 + 4 * 0.9, 1 + 2, 1 + 1, 1 + 2 * 0.9, 1])
    flat = bias_weights(f, SamplingBias(neglect=0, tension=0, distant=0, self_ref=0))
    assert np.allclose(flat, 1.0)


def test_neglected_important_memories_are_drawn_at_least_twice_their_share():
    n = 100
    important = np.arange(n) < 10                      # 10% of the pool
    f = PoolFeatures(center=np.where(important, 0.9, 0.2), hours_unseen=np.where(important, 24 * 10, 0.1),
                     age_days=np.zeros(n), tension=np.zeros(n, bool), about_self=np.zeros(n, bool))
    w = bias_weights(f, SamplingBias())
    rng = np.random.default_rng(11)
    picks = np.concatenate([draw(w, 3, rng) for _ in range(3000)])
    share = important[picks].mean()
    assert share >= 2 * 0.10
    assert share == pytest.approx(0.324, abs=0.02)      # the analytic share is 0.33 (w 4.6 vs 1.0)
    # broadened: the bias is gone, shares return to the pool's
    uniform = np.concatenate([draw(w, 3, rng, broadened=True) for _ in range(3000)])
    assert important[uniform].mean() == pytest.approx(0.10, abs=0.02)


def test_activity_is_quiet_during_conversation_and_rises_when_idle():
    table = [(None, 1.0), (NOW - timedelta(seconds=30), 0.0), (NOW - timedelta(seconds=60), 0.0),
             (NOW - timedelta(seconds=180), 1 - np.exp(-1)), (NOW - timedelta(hours=5), 1.0)]
    for last_user, expected in table:
        assert activity(NOW, last_user, quiet_after_user_s=60, idle_tau_s=120) == pytest.approx(expected, abs=1e-9)


def test_entropy_guard_broadens_a_pool_stuck_on_one_topic():
    guard = EntropyGuard(GuardSettings(window=8, max_topic_share=0.5, broaden_ticks=3))
    tea = np.eye(768)[0]
    assert guard.observe([tea, np.eye(768)[1], np.eye(768)[2]]) is None    # under half a window
    why = guard.observe([tea, tea, tea])
    assert why == ("DMN topic entropy 1.25 bits; one topic holds 67% of the last 6 surfaced memories: "
                   "broadening sampling for 3 ticks")
    assert guard.broadened and guard.alarms == 1
    pool = np.stack([tea, 0.95 * tea + 0.31 * np.eye(768)[3], np.eye(768)[4]])
    pool /= np.linalg.norm(pool, axis=1)[:, None]
    assert guard.exclusion(pool).tolist() == [True, True, False]
    for _ in range(3):
        guard.observe([np.eye(768)[4]])
    assert not guard.broadened and guard.exclusion(pool) is None


def test_review_prompt_names_what_won_and_what_lost():
    out = review_prompt("what is the capital of France?", [
        {"source": "user", "text": "what is the capital of France?", "salience": 0.6, "won": True},
        {"source": "dmn", "text": "the blue bicycle in the shed", "salience": 0.3, "won": False},
        {"source": "gut", "text": "unease", "salience": 0.2, "won": False}], 80)
    assert out.text == ("Last cycle I prioritised 'what is the capital of France?' over 'the blue bicycle "
                        "in the shed' (dmn). Was that right? Should I revisit it?")
    assert review_prompt("x", [{"source": "user", "text": "x", "salience": 1, "won": True}], 80) is None


async def _generator(mind, *, layers=None, settings=None, seed=5, creative=None):
    async def on_creative(item_id, out, now):
        if creative is not None:
            creative.append((item_id, out))
        await mind.loop.inner.milestone(8, {"dmn_item_id": item_id, "memory_ids": out.memory_ids}, now)
    return DmnGenerator(mind.pool, embed_model="fake-hash-768",
                        queue=DmnQueue(mind.loop.submit, lambda: mind.loop.queue.counts()["dmn"]),
                        rng=np.random.default_rng(seed),
                        settings=settings or DmnSettings(), layers=layers, on_creative=on_creative)


async def test_a_tick_queues_a_self_prompt_through_the_loops_submit(pool, tmp_path):
    mind, _ = await _mind(pool, tmp_path)
    await mind.store.store_many([
        NewMemory("tomato seedlings planted in the garden bed", event_time=NOW - timedelta(days=40)),
        NewMemory("tomato plants in the garden bed need more sun", event_time=NOW),
        NewMemory("invoice for roof repair arrived", event_time=NOW)])
    # cosines with this fake embedder: tomatoes 0.72, tomato/invoice 0.30–0.35
    gen = await _generator(mind, settings=DmnSettings(samples_per_tick=3, creative_min_days=7,
                                                      creative_low=0.5, creative_high=0.8))
    report = await gen.tick(NOW)
    assert report.produced and len(report.sampled) == 3
    [prompt] = [o for o in report.outputs if o.channel == "self_prompt"]
    assert prompt.text.startswith("This comes back to me, from ")
    assert prompt.text.endswith("'. Why does it matter now?")
    [pending] = mind.loop.queue.pending()
    assert (pending.source, pending.text, pending.urgency) == ("dmn", prompt.text, 0.2)
    scratch = await pool.fetchval("SELECT count(*) FROM scratch_buffer WHERE source_tag = 'internal_dmn'")
    assert scratch == 1                                       # the entry gate saw it: one pipeline
    items = await pool.fetch("SELECT channel, queued, memory_ids FROM dmn_items ORDER BY id")
    assert items[0]["channel"] == "self_prompt" and items[0]["queued"] is True
    # the two tomato memories are 40 days apart, related but not the same: a creative association
    creative = [i for i in items if i["channel"] == "creative"]
    assert len(creative) == 1 and creative[0]["queued"] is False
    event = await pool.fetchval("SELECT event FROM readiness_events WHERE milestone = 8")
    assert json.loads(event)["memory_ids"] == sorted(creative[0]["memory_ids"])
    # the loop processes it with 2-hop spreading (DMN cycles)
    record = await mind.loop.cycle(NOW)
    assert record.winner.source == "dmn"


async def test_goal_and_value_channels(pool, tmp_path):
    mind, _ = await _mind(pool, tmp_path)
    await mind.store.store(NewMemory("I want to learn to bake sourdough bread"))
    [goal_vec, value_vec] = await mind.providers.embedder.embed(
        ["learn to bake sourdough bread", "I want to learn"], "RETRIEVAL_DOCUMENT")

    async def layers():
        return [("learn to bake sourdough bread", goal_vec)], [("I want to learn", value_vec)]
    gen = await _generator(mind, layers=layers, settings=DmnSettings(samples_per_tick=1))
    report = await gen.tick(NOW)
    channels = {o.channel: o for o in report.outputs}
    assert set(channels) == {"self_prompt", "identity"}
    assert channels["self_prompt"].text == ("The user said 'I want to learn to bake sourdough bread', which "
                                            "connects to my goal 'learn to bake sourdough bread'. What does it "
                                            "suggest I do next?")
    assert channels["identity"].text == "'I want to learn to bake sourdough bread' touches my value 'I want to learn'."


async def test_suppressed_during_conversation_and_bounded_queue(pool, tmp_path):
    mind, _ = await _mind(pool, tmp_path)
    await mind.store.store(NewMemory("the river was high after the storm"))
    await mind.loop.submit("user", "hello there", now=NOW)
    await mind.loop.run(burst=True)
    gen = await _generator(mind)
    t_user = await pool.fetchval("SELECT max(at) FROM thought_log")
    quiet = await gen.tick(t_user + timedelta(seconds=10))
    assert (quiet.produced, quiet.reason) == (False, "suppressed (activity 0.00: recent conversation)")
    awake = [await gen.tick(t_user + timedelta(hours=2, seconds=i)) for i in range(4)]
    assert [r.produced for r in awake] == [True, True, False, False]
    assert awake[2].reason == "2 DMN items already wait for attention"


async def test_dmn_loses_to_a_user_message_wins_when_idle_and_wins_on_gut_charge(pool, tmp_path):
    mind, _ = await _mind(pool, tmp_path)
    loop = mind.loop
    await loop.submit("dmn", "the old lighthouse keeper's logbook", now=NOW)
    await loop.submit("user", "what time is it in Lisbon?", now=NOW)
    first = await loop.cycle(NOW)
    assert first.winner.source == "user"
    second = await loop.cycle(NOW + timedelta(seconds=1))      # idle now: the DMN item gets attention
    assert second.winner.source == "dmn"



async def test_an_inflated_gut_charge_lets_a_dmn_item_win_over_a_user_message(pool, tmp_path):
    # §3.10's test, through the gut: the mind holds a value the DMN thought is squarely about,
    # so the subconscious centroid (0.5·L0 + …) points at it and its charge is high
    dmn_text = "a storm is coming and the greenhouse glass is cracked"
    (tmp_path / "v.json").write_text(json.dumps([{"text": dmn_text, "weight": 1.0}]))
    mind, _ = await _mind(pool, tmp_path)
    await mind.loop.submit("dmn", dmn_text, now=NOW)
    await mind.loop.submit("user", "please list three fruits", now=NOW)
    record = await mind.loop.cycle(NOW)
    assert record.winner.source == "dmn"
    row = await pool.fetchrow("SELECT candidates, winner FROM thought_log ORDER BY id DESC LIMIT 1")
    cands = {c["source"]: c for c in json.loads(row["candidates"])}
    assert cands["dmn"]["components"]["emotional_charge"] > 0.8
    assert cands["user"]["components"]["emotional_charge"] < 0.2
    assert json.loads(row["winner"])["reason"] == "emotional charge"


async def test_entropy_guard_broadens_the_generator_off_a_stuck_topic(pool, tmp_path):
    mind, _ = await _mind(pool, tmp_path)
    tea = [NewMemory(f"earl grey tea steeped in the morning pot {i}", alpha=9, beta=1) for i in range(20)]
    other = [NewMemory(text) for text in ["a fox crossed the frozen field", "invoices are due friday",
                                          "the violin needs new strings", "trains to porto run hourly",
                                          "my bicycle chain squeaks", "clouds gathered over the bay"]]
    ids = await mind.store.store_many(tea + other)
    await pool.execute("UPDATE memories SET last_accessed = $1 WHERE id = ANY($2::bigint[])",
                       NOW - timedelta(days=30), ids[:20])
    gen = await _generator(mind, settings=DmnSettings(samples_per_tick=3, max_pending=100, review_every=1000,
                                                      entropy=GuardSettings(window=6, broaden_ticks=3)))
    tea_ids = set(ids[:20])
    seen = []
    for i in range(12):
        report = await gen.tick(NOW + timedelta(minutes=i))
        seen.append((gen.guard.broadened, report.sampled))
        if gen.guard.alarms:
            break
    assert gen.guard.alarms == 1 and all(set(s) <= tea_ids for _, s in seen)   # stuck on tea
    after = [(await gen.tick(NOW + timedelta(hours=1, minutes=i))).sampled for i in range(3)]
    assert all(not (set(s) & tea_ids) for s in after)                              # broadened away


async def test_a_memory_the_dmn_keeps_surfacing_alone_is_paused_by_the_breaker(pool, tmp_path):
    """Phase C enforced: one memory surfaced in the same company cycle after cycle trips its
    pattern dmn/#id; the generator then leaves it out and writes the breaker's events."""
    from src.consolidation.monitors import run_monitors
    from src.weights.safety import Safety, SafetySettings
    mind, _ = await _mind(pool, tmp_path)
    [mid] = await mind.store.store_many([NewMemory("the same old worry about the roof", event_time=NOW)])
    safety = Safety(SafetySettings(phase_c="enforced"))
    gen = DmnGenerator(mind.pool, embed_model="fake-hash-768", queue=DmnQueue(mind.loop.submit, lambda: 0),
                       rng=np.random.default_rng(1), settings=DmnSettings(samples_per_tick=1, max_pending=99),
                       limits=DmnLimits(safety=safety))
    idle = NOW + timedelta(days=2)                       # no recent conversation: never suppressed
    for cycle in range(5):
        report = await gen.tick(idle + timedelta(minutes=cycle))
        assert report.sampled == [mid]
        await run_monitors(pool, safety, "light_consolidation")
    report = await gen.tick(idle + timedelta(minutes=6))
    assert not report.produced and report.reason == "every sampled memory's pattern is paused by the circuit breaker"
    rows = await pool.fetch("SELECT enforced, memory_id FROM safety_events WHERE ceiling = 'circuit_breaker'")
    assert rows and all(r["enforced"] and r["memory_id"] == mid for r in rows)
