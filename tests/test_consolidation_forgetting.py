"""Decay (§4.4), demotion (§4.3) and temporal chain replay (§4.4) against the real database."""

from __future__ import annotations

from datetime import timedelta

from src.consolidation.deep.temporal_replay import run_replay
from src.consolidation.evolution.forgetting import run_decay, run_demotion
from src.consolidation.evolution.settings import EvolutionSettings
from src.weights.safety import Safety
from tests.evolution_helpers import NOW, add_memory, days_ago, weight

CFG = EvolutionSettings()


async def test_decay_only_for_old_rarely_used_rows(pool):
    old_rare = await add_memory(pool, "old and rare", accesses=[days_ago(120), days_ago(100)])
    old_unseen = await add_memory(pool, "never accessed", created=days_ago(91))
    old_popular = await add_memory(pool, "old but popular", accesses=[days_ago(200), days_ago(150), days_ago(95)])
    recent_rare = await add_memory(pool, "recent", accesses=[days_ago(89)])
    young = await add_memory(pool, "young", created=days_ago(10))
    immutable = await add_memory(pool, "boundary", created=days_ago(400), alpha=50.0, beta=1.0, immutable=True)
    counts: dict[str, int] = {}
    decayed = await run_decay(pool, Safety(), CFG, NOW, counts)
    assert sorted(decayed) == sorted([old_rare, old_unseen])
    assert counts == {"decayed": 2}
    assert await weight(pool, old_rare) == (1.0, 5.0)          # contradict(1.0): center 0.2 -> 0.167
    for mid in (old_popular, recent_rare, young):
        assert await weight(pool, mid) == (1.0, 4.0)
    assert await weight(pool, immutable) == (50.0, 1.0)
    rows = await pool.fetch("SELECT memory_id, actor, operation, applied_delta, reason FROM consolidation_log "
                            "ORDER BY memory_id")
    assert [(r["memory_id"], r["actor"], r["operation"], r["applied_delta"]) for r in rows] == [
        (old_rare, "decay", "contradict", 1.0), (old_unseen, "decay", "contradict", 1.0)]
    assert rows[0]["reason"] == "not accessed for 90+ days, 2 access(es)"
    assert await pool.fetchval("SELECT count(*) FROM memories") == 6      # never deleted


async def test_decay_once_per_idle_stretch(pool):
    mid = await add_memory(pool, "old and rare", accesses=[days_ago(120)])
    await run_decay(pool, Safety(), CFG, NOW, {})
    assert await run_decay(pool, Safety(), CFG, NOW + timedelta(days=30), {}) == []
    assert await weight(pool, mid) == (1.0, 5.0)
    # accessed again, then idle for another 90 days: decays once more
    await pool.execute("UPDATE memories SET last_accessed = $2, access_count = 2 WHERE id = $1", mid, NOW + timedelta(days=1))
    assert await run_decay(pool, Safety(), CFG, NOW + timedelta(days=95), {}) == [mid]
    assert await weight(pool, mid) == (1.0, 6.0)


async def test_decay_reads_the_minds_clock_not_the_event_time(pool):
    """An imported conversation from last year was learned yesterday: not idle for a year."""
    imported = await add_memory(pool, "we talked about the lake house", created=days_ago(1))
    await pool.execute("UPDATE memories SET event_time = $2 WHERE id = $1", imported, days_ago(400))
    assert await run_decay(pool, Safety(), CFG, NOW, {}) == []
    assert await weight(pool, imported) == (1.0, 4.0)
    # 90 days on the mind's clock with no access: now it is idle, and decays
    assert await run_decay(pool, Safety(), CFG, NOW + timedelta(days=89), {}) == []
    assert await run_decay(pool, Safety(), CFG, NOW + timedelta(days=92), {}) == [imported]
    assert await weight(pool, imported) == (1.0, 5.0)


async def test_demotion_is_gradual_and_stops_at_dormant(pool):
    idle_goal = await add_memory(pool, "a goal nobody revisits", alpha=6.0, beta=3.0, accesses=[days_ago(40)])
    busy_goal = await add_memory(pool, "a goal in use", alpha=6.0, beta=3.0, accesses=[days_ago(2)])
    plain = await add_memory(pool, "ordinary", accesses=[days_ago(60)])       # below the goal range
    counts: dict[str, int] = {}
    assert await run_demotion(pool, Safety(), CFG, NOW, counts) == [idle_goal]
    assert await weight(pool, idle_goal) == (6.0, 3.5)
    assert await weight(pool, busy_goal) == (6.0, 3.0)
    assert await weight(pool, plain) == (1.0, 4.0)
    # at most once per week
    assert await run_demotion(pool, Safety(), CFG, NOW + timedelta(days=3), {}) == []
    assert await run_demotion(pool, Safety(), CFG, NOW + timedelta(days=8), {}) == [idle_goal]
    assert await weight(pool, idle_goal) == (6.0, 4.0)


async def test_demotion_reaches_promoted_memories_below_the_goal_range(pool):
    mid = await add_memory(pool, "promoted once", alpha=2.0, beta=4.0, accesses=[days_ago(50)])
    await pool.execute("INSERT INTO promotions (memory_id, tier, status, at, reason) "
                       "VALUES ($1, 'goal', 'applied', $2, 'test')", mid, days_ago(45))
    assert await run_demotion(pool, Safety(), CFG, NOW, {}) == [mid]
    await pool.execute("UPDATE memories SET depth_weight_beta = 20 WHERE id = $1", mid)   # now dormant (0.09)
    assert await run_demotion(pool, Safety(), CFG, NOW + timedelta(days=10), {}) == []


async def test_temporal_replay_links_consecutive_episodes_once_per_window(pool):
    a = await add_memory(pool, "woke up", created=NOW - timedelta(hours=5))
    b = await add_memory(pool, "made coffee", created=NOW - timedelta(hours=4, minutes=50))
    c = await add_memory(pool, "read mail", created=NOW - timedelta(hours=4, minutes=40))
    far = await add_memory(pool, "evening walk", created=NOW - timedelta(hours=1))          # gap > 30 min
    await add_memory(pool, "a fact", memory_type="semantic", created=NOW - timedelta(hours=4, minutes=45))
    await pool.execute("INSERT INTO memory_co_access (memory_id_a, memory_id_b, co_access_count, last_co_accessed) "
                       "VALUES ($1, $2, 3, $3)", a, b, NOW - timedelta(days=1))
    counts: dict[str, int] = {}
    assert await run_replay(pool, CFG, NOW, counts) == 2
    rows = await pool.fetch("SELECT memory_id_a, memory_id_b, co_access_count, temporal FROM memory_co_access "
                            "ORDER BY 1, 2")
    assert [tuple(r) for r in rows] == [(a, b, 4, True), (b, c, 1, True)]
    assert far not in {r["memory_id_b"] for r in rows}
    assert await run_replay(pool, CFG, NOW + timedelta(hours=1), {}) == 0     # replayed once per window
    assert counts == {"temporal_links": 2}
