"""The weight choke point and the safety ceilings (plan §3.9), on real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import math
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from src.weights.apply import (
    MAX_ACCESS_TIMESTAMPS,
    AccessTouch,
    WeightChange,
    apply_weight_changes,
)
from src.weights.center_summary import read_summary
from src.weights.safety import Safety
from src.weights.safety_rules import shannon_entropy
from src.weights.settings import SafetySettings
from src.weights.stochastic import diminished_gain

ROOT = Path(__file__).resolve().parents[1]


async def _memory(pool, alpha=1.0, beta=4.0, *, immutable=False, kind=None, content="a memory"):
    meta = json.dumps({"kind": kind} if kind else {})
    return await pool.fetchval(
        """INSERT INTO memories (content, depth_weight_alpha, depth_weight_beta, immutable, metadata)
           VALUES ($1, $2, $3, $4, $5::jsonb) RETURNING id""", content, alpha, beta, immutable, meta)


def _reinforce(mid, amount=1.0, **kw):
    return WeightChange(mid, "reinforce", amount, kw.pop("actor", "test"), kw.pop("reason", "because"), **kw)


async def _weights(pool, mid):
    row = await pool.fetchrow("SELECT depth_weight_alpha a, depth_weight_beta b FROM memories WHERE id=$1", mid)
    return row["a"], row["b"]


async def test_ceiling_rejects_when_enforced_and_logs(pool):
    mid = await _memory(pool, 18.0, 1.0)  # center 0.947
    [out] = await apply_weight_changes(pool, [_reinforce(mid, 20.0)], safety=Safety())
    assert out.blocked_by == "hard_ceiling" and out.applied == 0.0
    assert out.reason == "center 0.958 would exceed the 0.95 ceiling"
    assert await _weights(pool, mid) == (18.0, 1.0)
    event = await pool.fetchrow("SELECT ceiling, phase, memory_id, reason, enforced, action FROM safety_events")
    assert (event["ceiling"], event["phase"], event["memory_id"], event["enforced"]) == ("hard_ceiling", "A", mid, True)
    assert event["reason"] == "center 0.958 would exceed the 0.95 ceiling"
    assert json.loads(event["action"])["actor"] == "test"
    assert await pool.fetchval("SELECT count(*) FROM consolidation_log") == 0


async def test_ceiling_in_shadow_mode_logs_and_lets_it_through(pool):
    mid = await _memory(pool, 18.0, 1.0)
    safety = Safety(SafetySettings(phase_a="shadow"))
    [out] = await apply_weight_changes(pool, [_reinforce(mid, 5.0)], safety=safety)
    gain = 5.0 / math.log2(18.0 + 1.0 + 1.0)
    assert out.blocked_by is None and out.applied == pytest.approx(gain)
    assert await _weights(pool, mid) == (pytest.approx(18.0 + gain), 1.0)
    assert await pool.fetchval("SELECT enforced FROM safety_events WHERE ceiling = 'hard_ceiling'") is False


async def test_immutable_memories_are_exempt_and_unchanged(pool):
    mid = await _memory(pool, 50.0, 1.0, immutable=True)
    outs = await apply_weight_changes(pool, [_reinforce(mid), WeightChange(mid, "contradict", 0.5, "t", "r")],
                                      safety=Safety())
    assert [o.blocked_by for o in outs] == ["immutable", "immutable"]
    assert await _weights(pool, mid) == (50.0, 1.0)
    assert await pool.fetchval("SELECT count(*) FROM safety_events") == 0


async def test_twenty_reinforcements_show_diminishing_returns(pool):
    mid = await _memory(pool)
    safety = Safety()
    gains = []
    for _ in range(20):
        [out] = await apply_weight_changes(pool, [_reinforce(mid, 1.0)], safety=safety)
        gains.append(out.applied)
    assert all(later < earlier for earlier, later in zip(gains, gains[1:], strict=False))
    alpha, beta = 1.0, 4.0
    for g in gains:
        assert g == pytest.approx(diminished_gain(1.0, alpha + beta))
        alpha += g
    assert await _weights(pool, mid) == (pytest.approx(alpha), 4.0)
    rows = await pool.fetch("SELECT alpha_before, alpha_after, applied_delta, requested_delta, actor, reason "
                            "FROM consolidation_log WHERE memory_id=$1 ORDER BY id", mid)
    assert len(rows) == 20
    assert all(r["alpha_after"] == pytest.approx(r["alpha_before"] + r["applied_delta"]) for r in rows)
    assert all(r["requested_delta"] == 1.0 and r["actor"] == "test" for r in rows)
    assert [r["applied_delta"] for r in rows] == pytest.approx(gains)


async def test_changes_in_one_batch_apply_in_order(pool):
    mid = await _memory(pool)
    outs = await apply_weight_changes(
        pool, [_reinforce(mid, 1.0), WeightChange(mid, "contradict", 0.5, "t", "r"), _reinforce(mid, 1.0)],
        safety=Safety())
    g1 = diminished_gain(1.0, 5.0)
    g2 = diminished_gain(1.0, 5.0 + g1 + 0.5)
    assert [o.applied for o in outs] == pytest.approx([g1, 0.5, g2])
    assert outs[2].alpha_before == pytest.approx(1.0 + g1) and outs[2].beta_before == 4.5
    assert await _weights(pool, mid) == (pytest.approx(1 + g1 + g2), 4.5)


async def test_fifty_concurrent_reinforcements_lose_nothing(pool):
    mid = await _memory(pool)
    safety = Safety()
    await asyncio.gather(*(apply_weight_changes(pool, [_reinforce(mid, 1.0)], safety=safety) for _ in range(50)))
    alpha = 1.0
    for _ in range(50):
        alpha += diminished_gain(1.0, alpha + 4.0)
    assert await _weights(pool, mid) == (pytest.approx(alpha, rel=1e-12), 4.0)
    assert await pool.fetchval("SELECT count(*) FROM consolidation_log WHERE memory_id=$1", mid) == 50
    chain = await pool.fetch("SELECT alpha_before, alpha_after FROM consolidation_log ORDER BY id")
    assert all(a["alpha_after"] == pytest.approx(b["alpha_before"]) for a, b in zip(chain, chain[1:], strict=False))


async def test_goal_budget_stops_one_goal_taking_over(pool):
    goals = [await _memory(pool, 3.0, 3.0, kind="goal", content=f"goal {i}") for i in range(3)]
    lone = await _memory(pool, 3.0, 3.0)  # not a goal: the budget does not apply
    outs = await apply_weight_changes(pool, [_reinforce(goals[0], 20.0), _reinforce(lone, 20.0)], safety=Safety())
    assert outs[0].blocked_by == "goal_budget"
    assert outs[0].reason.startswith("goal would hold 4")
    assert outs[0].reason.endswith("of the goal-weight budget, above the 40% cap")
    assert outs[1].blocked_by is None
    small = await apply_weight_changes(pool, [_reinforce(goals[1], 0.1)], safety=Safety())
    assert small[0].blocked_by is None  # 0.5 -> 0.505: 33.5% of the budget


async def test_a_lone_goal_is_not_blocked_by_the_budget(pool):
    goal = await _memory(pool, 3.0, 3.0, kind="goal")
    [out] = await apply_weight_changes(pool, [_reinforce(goal, 1.0)], safety=Safety())
    assert out.blocked_by is None


async def test_phase_b_rate_limit_and_two_gate_shadow_then_enforced(pool):
    mid = await _memory(pool, 2.0, 2.0)
    change = _reinforce(mid, 10.0, cycle_baseline_center=0.5, actor="deep_consolidation")
    # Phase B is enforced by default since consolidation runs (issue 14); shadow stays selectable.
    [shadow] = await apply_weight_changes(pool, [change], safety=Safety(SafetySettings(phase_b="shadow")))
    assert shadow.blocked_by is None
    ev = await pool.fetchrow("SELECT ceiling, phase, enforced, reason FROM safety_events")
    assert (ev["ceiling"], ev["phase"], ev["enforced"]) == ("rate_limit", "B", False)
    assert ev["reason"].endswith("more than the 0.1 allowed per consolidation cycle")
    mid2 = await _memory(pool, 2.0, 2.0)
    enforced = Safety()
    [blocked] = await apply_weight_changes(pool, [_reinforce(mid2, 10.0, cycle_baseline_center=0.5)], safety=enforced)
    assert blocked.blocked_by == "rate_limit"
    [promo] = await apply_weight_changes(
        pool, [_reinforce(mid2, 0.1, validation_margin=-0.2, capacity_used=0.95)], safety=enforced)
    assert promo.blocked_by == "two_gate"
    assert promo.reason == ("validation margin -0.200 is below the required 0.000; "
                            "capacity used 0.950 exceeds the cap 0.900")


async def test_touch_counts_accesses_and_bounds_presentations(pool):
    mid = await _memory(pool)
    other = await _memory(pool, content="untouched")
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(MAX_ACCESS_TIMESTAMPS + 6):
        await apply_weight_changes(pool, [], safety=Safety(), touch=AccessTouch([mid], t0 + timedelta(minutes=i)))
    row = await pool.fetchrow("SELECT access_count, last_accessed, access_timestamps, depth_weight_alpha "
                              "FROM memories WHERE id=$1", mid)
    assert row["access_count"] == MAX_ACCESS_TIMESTAMPS + 6
    assert row["last_accessed"] == t0 + timedelta(minutes=MAX_ACCESS_TIMESTAMPS + 5)
    stamps = row["access_timestamps"]
    assert len(stamps) == MAX_ACCESS_TIMESTAMPS
    assert stamps[0] == t0 + timedelta(minutes=6) and stamps[-1] == row["last_accessed"]
    assert row["depth_weight_alpha"] == 1.0
    assert await pool.fetchval("SELECT access_count FROM memories WHERE id=$1", other) == 0
    assert await pool.fetchval("SELECT count(*) FROM consolidation_log") == 0


async def test_missing_memory_is_reported_not_raised(pool):
    [out] = await apply_weight_changes(pool, [_reinforce(999_999)], safety=Safety())
    assert (out.blocked_by, out.reason) == ("missing", "no such memory")


def test_bad_change_is_refused():
    with pytest.raises(ValueError, match="amount must be >= 0"):
        WeightChange(1, "reinforce", -1.0, "t", "r")
    with pytest.raises(ValueError, match="operation must be 'reinforce' or 'contradict'"):
        WeightChange(1, "promote", 1.0, "t", "r")


async def test_circuit_breaker_trips_on_repetition_and_is_written(pool):
    mid = await _memory(pool, 1.0, 4.0)
    safety = Safety()
    for _ in range(6):
        assert safety.check_pattern("light_consolidation", mid, frozenset({"m1"})) == (True, "")  # shadow
        safety.close_cycle()
    # the trip at the fifth close, the sixth reinforcement it would refuse, the trip again
    assert await safety.write_events(pool) == 3
    rows = await pool.fetch("SELECT ceiling, phase, enforced, reason, memory_id FROM safety_events ORDER BY id")
    assert [(r["ceiling"], r["phase"], r["enforced"], r["memory_id"]) for r in rows] == [
        ("circuit_breaker", "C", False, mid)] * 3
    assert rows[0]["reason"] == (f"pattern 'light_consolidation/#{mid}' reinforced 5 cycles in a row with no new "
                                 "evidence (limit 5); pausing its reinforcement")
    enforced = Safety(SafetySettings(phase_c="enforced"))
    for _ in range(5):
        enforced.check_pattern("dmn", 3, frozenset({"a"}))
        enforced.close_cycle()
    assert enforced.check_pattern("dmn", 3, frozenset({"a"}))[0] is False
    assert enforced.check_pattern("dmn", 3, frozenset({"b"})) == (True, "")     # new evidence passes


async def test_entropy_of_the_center_summary_matches_pure_rule_and_monitor_alarms_on_collapse(pool):
    for a, b in [(1, 4), (10, 2), (50, 2), (30, 25), (1, 1)]:
        await _memory(pool, float(a), float(b))
    summary = await read_summary(pool)
    h, n = summary.entropy_bits(), summary.memories
    assert n == 5
    assert h == pytest.approx(shannon_entropy([1 / 5, 10 / 12, 50 / 52, 30 / 55, 0.5]), rel=1e-9)
    safety = Safety()
    healthy = [safety.observe_entropy(5.0 + 0.01 * (i % 3), memories=100)[0] for i in range(30)]
    assert all(healthy) and safety.pending == []
    for step in range(40):
        safety.observe_entropy(5.0 - 0.1 * step, memories=100)
    assert any(e.ceiling == "entropy_monitor" and not e.enforced for e in safety.pending)


def test_cba_coherence_alerts_on_drop():
    safety = Safety()
    c1, ok1, _ = safety.observe_coherence(1.0, 1.0, 1.0)
    c2, ok2, reason = safety.observe_coherence(0.5, 1.0, 1.0)
    assert (c1, ok1) == (1.0, True)
    assert c2 == pytest.approx(0.5 ** (1 / 3))
    assert ok2 is True  # phase C shadow: reported, not enforced
    assert safety.pending[0].ceiling == "cba_coherence"
    assert safety.pending[0].reason == "coherence fell from 1.000 to 0.794, a drop of 0.206 (tolerance 0.1)"


def test_status_line_names_the_phases():
    assert Safety().status_line() == "safety: phase A enforced, phase B enforced, phase C shadow"


_WEIGHT_WRITE = re.compile(r"depth_weight_(alpha|beta)\s*=(?!=)|depth_weight_(alpha|beta)\s*\+=", re.I)


def test_no_sql_outside_the_choke_point_writes_weights():
    offenders = []
    for path in (ROOT / "src").rglob("*.py"):
        if path == ROOT / "src" / "weights" / "apply.py":
            continue
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if _WEIGHT_WRITE.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert offenders == []
    # and the choke point itself does write them
    assert _WEIGHT_WRITE.search((ROOT / "src" / "weights" / "apply.py").read_text())


async def test_events_of_every_batch_are_written_not_only_the_first(pool):
    # take_events swaps the pending list; ceilings must append to the new one
    safety = Safety()
    first, second = await _memory(pool, 2.0, 2.0), await _memory(pool, 2.0, 2.0)
    for mid in (first, second):
        [out] = await apply_weight_changes(pool, [_reinforce(mid, 10.0, cycle_baseline_center=0.5)], safety=safety)
        assert out.blocked_by == "rate_limit"
    rows = await pool.fetch("SELECT memory_id, ceiling FROM safety_events ORDER BY id")
    assert [(r["memory_id"], r["ceiling"]) for r in rows] == [(first, "rate_limit"), (second, "rate_limit")]


class _Paused:
    """Batch A's connection, held at its weight UPDATE (after its checks ran) until batch B
    is done: the interleaving two tasks sharing one Safety can meet in production."""

    def __init__(self, conn, until: asyncio.Event):
        self._conn, self._until = conn, until

    def is_in_transaction(self) -> bool:
        return self._conn.is_in_transaction()

    async def fetch(self, *a):
        return await self._conn.fetch(*a)

    async def fetchval(self, *a):
        return await self._conn.fetchval(*a)

    async def execute(self, sql, *a):
        if "UPDATE memories" in sql:   # the weight UPDATE (with its audit rows)
            await self._until.wait()
        return await self._conn.execute(sql, *a)


async def test_concurrent_batches_write_their_own_events_and_a_rollback_leaves_none(pool):
    """Issue 11 item 10: one Safety shared by two tasks; each batch's event lands with its
    own transaction (no shared pending list), and the rolled-back one leaves no event."""
    safety = Safety()
    near_a, near_b = await _memory(pool, 18.0, 1.0), await _memory(pool, 18.0, 1.0)   # center 0.947
    free_a, free_b = await _memory(pool), await _memory(pool)
    b_done = asyncio.Event()
    seen_in_a: list = []

    async def batch_a() -> None:
        async with pool.acquire() as conn:
            tx = conn.transaction()
            await tx.start()
            try:
                outs = await apply_weight_changes(_Paused(conn, b_done), [_reinforce(free_a),
                                                                          _reinforce(near_a, 20.0)], safety=safety)
                seen_in_a.extend(r["memory_id"] for r in await conn.fetch("SELECT memory_id FROM safety_events"))
            finally:
                await tx.rollback()
            assert [o.blocked_by for o in outs] == [None, "hard_ceiling"]

    async def batch_b() -> None:
        await asyncio.sleep(0.2)   # let A run its checks and reach its UPDATE first
        try:
            outs = await apply_weight_changes(pool, [_reinforce(free_b), _reinforce(near_b, 20.0)], safety=safety)
        finally:
            b_done.set()
        assert [o.blocked_by for o in outs] == [None, "hard_ceiling"]

    await asyncio.gather(batch_a(), batch_b())
    assert sorted(seen_in_a) == sorted([near_a, near_b])   # its own event, and B's committed one
    rows = await pool.fetch("SELECT memory_id, ceiling FROM safety_events ORDER BY id")
    assert [(r["memory_id"], r["ceiling"]) for r in rows] == [(near_b, "hard_ceiling")]
    assert safety.pending == []
