"""Gate tuning (plan §4.5) on crafted decision histories, against the real database."""

from __future__ import annotations

import json
import random

import pytest
from pgvector import HalfVector

from src.consolidation.evolution.gate_tuning import run_gate_tuning
from src.consolidation.evolution.settings import EvolutionSettings
from src.gates.memory_gate import Gates
from src.gates.settings import GateSettings
from src.gates.tuning import tuned_settings
from src.providers.embedding import embed_memories
from src.weights.safety import Safety, SafetySettings
from tests.evolution_helpers import NOW, add_memory, days_ago
from tests.fakes import HashEmbedder
from tests.fakes_llm import ScriptedLLM

CFG = EvolutionSettings()


async def _decision(pool, action, at, preview, *, gate="exit", rule=None, memory_id=None, noise_rate=None):
    return await pool.fetchval(
        """INSERT INTO gate_decisions (at, gate, source_tag, content_preview, action, reason, rule, memory_id,
                                       noise_rate)
           VALUES ($1, $2, 'external_user', $3, $4, 'test', $5, $6, $7) RETURNING id""",
        at, gate, preview, action, rule, memory_id, noise_rate)


def _texts(n: int) -> list[str]:
    return [f"remember item w{i}a w{i}b w{i}c w{i}d" for i in range(n)]


async def _dropped_then_needed(pool, embedder, n_dropped: int, n_needed: int, *, gate="exit", rule=None):
    texts = _texts(n_dropped)
    for t in texts:
        await _decision(pool, "drop" if gate == "exit" else "skip", days_ago(10), t, gate=gate, rule=rule)
    # some come back later and are retrieved: needed after all (both id parities: the
    # held-out halves must agree)
    vecs = await embed_memories(embedder, texts, ["episodic"] * len(texts))
    for i in [k for k in range(n_dropped) if k % 4 in (0, 1)][:n_needed]:
        await add_memory(pool, texts[i], created=days_ago(5), vector=vecs[i], embed_model=embedder.model_name,
                         accesses=[days_ago(3)])


async def _persisted_never_used(pool, n: int):
    for i in range(n):
        mid = await add_memory(pool, f"kept note {i}", created=days_ago(20))
        await _decision(pool, "persist", days_ago(20), f"kept note {i}", memory_id=mid)


async def _tune(pool, embedder, safety=None):
    counts: dict[str, int] = {}
    applied = await run_gate_tuning(pool, embedder, safety or Safety(), CFG, NOW, counts)
    return applied, counts


async def test_dropped_content_needed_later_makes_the_gate_more_permissive(pool):
    embedder = HashEmbedder()
    await _dropped_then_needed(pool, embedder, 30, 6)          # 20% needed > 10%
    applied, counts = await _tune(pool, embedder)
    assert applied == {"noise_floor": pytest.approx(0.06), "scratch_ttl_hours": 28.0}
    assert counts == {"gate_params_changed": 2, "gate_proposals_refused": 0}
    rows = await pool.fetch("SELECT param, before, proposed, applied, direction, evidence FROM gate_tuning_log "
                            "ORDER BY param")
    assert [(r["param"], r["before"], r["applied"], r["direction"]) for r in rows] == [
        ("noise_floor", 0.05, True, "more_permissive"), ("scratch_ttl_hours", 24.0, True, "more_permissive")]
    evidence = json.loads(rows[0]["evidence"])
    assert (evidence["needed_later"], evidence["dropped_checked"], evidence["bounds"]) == (6, 30, [0.01, 0.2])
    stored = {r["param"]: r["value"] for r in await pool.fetch("SELECT param, value FROM gate_tuning")}
    assert stored == {"noise_floor": pytest.approx(0.06), "scratch_ttl_hours": 28.0}


async def test_skipped_short_content_needed_later_lowers_that_skip_rate(pool):
    embedder = HashEmbedder()
    await _dropped_then_needed(pool, embedder, 24, 6, gate="entry", rule="short")
    applied, _ = await _tune(pool, embedder)
    assert applied == {"short_skip_rate": pytest.approx(0.93), "scratch_ttl_hours": 28.0}


async def test_persisted_but_never_retrieved_makes_the_gate_more_selective(pool):
    await _persisted_never_used(pool, 30)
    applied, counts = await _tune(pool, HashEmbedder())
    # short_skip_rate 0.95 -> 0.97 would use 93% of its range: the Two-Gate capacity cap refuses it
    assert applied == {"noise_floor": pytest.approx(0.04), "mechanical_skip_rate": pytest.approx(0.92),
                       "scratch_ttl_hours": 20.0}
    assert counts == {"gate_params_changed": 3, "gate_proposals_refused": 1}
    refused = await pool.fetchrow("SELECT proposed, applied, reason FROM gate_tuning_log WHERE param = 'short_skip_rate'")
    assert (refused["proposed"], refused["applied"]) == (pytest.approx(0.97), False)
    assert refused["reason"] == "capacity used 0.931 exceeds the cap 0.900"
    event = await pool.fetchrow("SELECT ceiling, phase, enforced FROM safety_events")
    assert tuple(event) == ("two_gate", "B", True)


async def test_few_cases_or_a_lucky_half_move_nothing(pool):
    embedder = HashEmbedder()
    await _persisted_never_used(pool, 10)                      # below min_evidence (20)
    assert await _tune(pool, embedder) == ({}, {"gate_params_changed": 0, "gate_proposals_refused": 0})


async def test_parameters_never_pass_their_bounds(pool):
    await _persisted_never_used(pool, 30)
    shadow = Safety(SafetySettings(phase_b="shadow"))           # no capacity cap: only the bounds hold
    history = []
    for _ in range(12):
        await _tune(pool, HashEmbedder(), shadow)
        history.append({r["param"]: r["value"] for r in await pool.fetch("SELECT param, value FROM gate_tuning")})
    assert all(0.01 <= h["noise_floor"] <= 0.20 and 6.0 <= h["scratch_ttl_hours"] <= 72.0 for h in history)
    assert history[-1] == {"noise_floor": pytest.approx(0.01), "short_skip_rate": pytest.approx(0.99),
                           "mechanical_skip_rate": pytest.approx(0.98), "scratch_ttl_hours": 6.0}


async def test_tuning_starts_from_the_value_the_gates_last_used(pool):
    await _decision(pool, "persist", days_ago(1), "x", noise_rate=0.12)
    await _persisted_never_used(pool, 30)
    applied, _ = await _tune(pool, HashEmbedder())
    assert applied["noise_floor"] == pytest.approx(0.11)


async def test_gates_read_the_tuned_values(pool):
    await pool.execute("INSERT INTO gate_tuning (param, value, updated_at) VALUES "
                       "('noise_floor', 0.08, $1), ('short_skip_rate', 0.9, $1), ('scratch_ttl_hours', 30, $1)", NOW)
    settings = GateSettings()
    gates = Gates.build(pool, HashEmbedder(), ScriptedLLM(configured=False), settings, Safety(),
                        rng=random.Random(3))
    admitted = await gates.admit("a message long enough to be buffered", exchange=False)
    live = gates.settings
    assert (live.exit.noise_floor, live.entry.short_skip_rate, live.scratch.ttl_hours) == (0.08, 0.9, 30.0)
    assert (gates.exit.settings, gates.entry.settings, gates.lifecycle.settings) == (live, live.entry, live.scratch)
    assert settings == GateSettings()                 # the value it was built with is not changed
    ttl = await pool.fetchval("SELECT expires_at - created_at FROM scratch_buffer WHERE id = $1", admitted.scratch_id)
    assert ttl.total_seconds() == 30 * 3600


def test_tuned_settings_ignore_values_outside_the_fields_and_leave_the_old_value():
    settings = GateSettings()
    tuned, used = tuned_settings(settings, {"noise_floor": 1.5, "scratch_ttl_hours": 12.0, "unknown": 1.0,
                                            "short_skip_rate": 0.5})
    assert used == {"scratch_ttl_hours": 12.0, "short_skip_rate": 0.5}
    assert (tuned.exit.noise_floor, tuned.scratch.ttl_hours, tuned.entry.short_skip_rate) == (0.05, 12.0, 0.5)
    assert settings == GateSettings()


async def test_needed_later_requires_a_retrieved_near_duplicate(pool):
    embedder = HashEmbedder()
    texts = _texts(30)
    for t in texts:
        await _decision(pool, "drop", days_ago(10), t)
    vecs = await embed_memories(embedder, texts, ["episodic"] * 30)
    for i in range(0, 12, 2):     # they come back, but nobody retrieves them
        await add_memory(pool, texts[i], created=days_ago(5), vector=vecs[i], embed_model=embedder.model_name)
    applied, _ = await _tune(pool, embedder)
    assert applied == {}
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE embedding = $1", HalfVector(vecs[0])) == 1


async def test_evidence_from_one_held_out_half_only_is_refused(pool):
    embedder = HashEmbedder()
    texts = _texts(30)
    for t in texts:
        await _decision(pool, "drop", days_ago(10), t)
    vecs = await embed_memories(embedder, texts, ["episodic"] * 30)
    for i in range(0, 12, 2):                                   # decision ids 1, 3, 5, …: one parity only
        await add_memory(pool, texts[i], created=days_ago(5), vector=vecs[i], embed_model=embedder.model_name,
                         accesses=[days_ago(3)])
    applied, counts = await _tune(pool, embedder)
    assert applied == {} and counts == {"gate_params_changed": 0, "gate_proposals_refused": 2}
    reasons = {r["param"]: r["reason"] for r in await pool.fetch("SELECT param, reason FROM gate_tuning_log")}
    assert reasons["noise_floor"] == "validation margin -0.100 is below the required 0.000"


async def test_tuning_writes_only_its_own_safety_events(pool):
    """Another task's monitor event waiting in the shared Safety is not written by tuning's
    transaction (it belongs to whoever raised it)."""
    from src.weights.safety import SafetyEvent

    safety = Safety()
    foreign = SafetyEvent("entropy_monitor", "C", "collapsing", False, action={"entropy_bits": 1.0})
    safety.pending.append(foreign)
    await _persisted_never_used(pool, 30)
    await _tune(pool, HashEmbedder(), safety)
    rows = await pool.fetch("SELECT ceiling FROM safety_events")
    assert [r["ceiling"] for r in rows] == ["two_gate"]
    assert safety.pending == [foreign]
