"""/readiness shows the ten milestones of plan §5.2 as the mind recorded them, with their events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from src.bootstrap.readiness import format_readiness, readiness
from tests.test_loop import _mind

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


async def test_newborn_mind_has_reached_nothing(pool):
    achievements = await readiness(pool)
    assert len(achievements) == 10
    assert all(a.reached_at is None for a in achievements)
    text = format_readiness(achievements)
    assert text.splitlines()[0] == "Readiness: 0/10 achievements"
    assert text.splitlines()[1] == " [ ]  1. First memory formation (entry → scratch → exit → persist) — not yet"


async def test_memory_formation_and_retrieval_are_recorded_where_they_happen(pool, tmp_path):
    mind, _ = await _mind(pool, tmp_path)
    loop = mind.loop
    await loop.submit("user", "my sister Ana lives in Porto near the river", now=T0)
    await loop.cycle(T0)
    assert {a.key for a in await readiness(pool) if a.reached_at} == set()   # nothing persisted yet
    report = await mind.gates.exit.flush(reason="test")
    assert report.actions.get("persist", 0) >= 1
    [first] = [a for a in await readiness(pool) if a.reached_at]
    persisted = [r["id"] for r in await pool.fetch("SELECT id FROM memories WHERE metadata ? 'scratch_id' "
                                                   "ORDER BY id")]
    assert first.key == "memory_formation"
    assert first.event == {"memory_ids": persisted, "path": "entry → scratch → exit → persist"}
    await loop.submit("user", "tell me where my sister Ana lives", now=T0 + timedelta(minutes=1))
    await loop.cycle(T0 + timedelta(minutes=1))
    reached = {a.key: a for a in await readiness(pool) if a.reached_at}
    assert set(reached) == {"memory_formation", "retrieval_success"}
    event = reached["retrieval_success"].event
    assert event["cycle"] == 2 and event["query"] == "tell me where my sister Ana lives"
    # relevant by the stated measure: cosine to the question over the embed model's floor, a word in common
    assert event["memory_ids"] == [persisted[0]]
    assert event["measure"].startswith("cosine 0.") and event["measure"].endswith(" ≥ 0.35, shares 'ana', 'live', 'sister'")
