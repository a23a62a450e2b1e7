"""The goal budget under concurrency (plan §3.9 Phase A, issue 25 item 6), on real PostgreSQL.

The budget is a share of the sum over every goal row, so a change must judge it against
the goals as they are when it commits, not as an open transaction saw them. Three goals
of centers 0.3 (A), 0.6 (B) and 0.5 (C): raising A to 0.6 is within the 40% cap while B
stands at 0.6 (0.6 / 1.7 = 35%) and above it once B has fallen to 0.3 (0.6 / 1.4 = 43%).
"""

from __future__ import annotations

import asyncio
import json

import pytest

from src.weights.apply import GOAL_BUDGET_LOCK_KEY, WeightChange, apply_weight_changes
from src.weights.safety import Safety
from src.weights.stochastic import diminished_gain

#: reinforce A = Beta(3, 7) to center 0.6 exactly: alpha 10.5, through diminishing returns
RAISE_A = 7.5 * 3.4594316186372973     # gain 7.5 × log2(11)
LOWER_B = 10.0                         # Beta(6, 4) -> Beta(6, 14): center 0.3


async def _goal(pool, alpha: float, beta: float, kind: str = "goal") -> int:
    return await pool.fetchval(
        """INSERT INTO memories (content, depth_weight_alpha, depth_weight_beta, metadata)
           VALUES ('a goal', $1, $2, $3::jsonb) RETURNING id""", alpha, beta, json.dumps({"kind": kind}))


async def _waiting_for(pool, key: int, task: asyncio.Task) -> None:
    """Until some backend waits for the advisory lock `key`, or `task` has finished without
    waiting (no timing assert: one of the two must come)."""
    while not task.done():
        if await pool.fetchval(
                """SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
                                     AND ((classid::bigint << 32) | objid::bigint) = $1)""", key):
            return
        await asyncio.sleep(0.01)     # a server-side state to poll: no event to wait on


def test_the_numbers_of_the_scenario():
    assert 3 + diminished_gain(RAISE_A, 10.0) == pytest.approx(10.5)
    assert 10.5 / 17.5 == pytest.approx(0.6)
    assert 0.6 / (0.6 + 0.6 + 0.5) <= 0.40 < 0.6 / (0.6 + 0.3 + 0.5)


async def test_a_goal_raise_waits_for_a_concurrent_goal_change_and_sees_it(pool):
    a, b = await _goal(pool, 3.0, 7.0), await _goal(pool, 6.0, 4.0)
    await _goal(pool, 5.0, 5.0)
    safety = Safety()
    lowering = await pool.acquire()
    try:
        tx = lowering.transaction()
        await tx.start()
        [lowered] = await apply_weight_changes(lowering, [WeightChange(b, "contradict", LOWER_B, "decay", "unused")],
                                               safety=safety)
        assert lowered.blocked_by is None
        raising = asyncio.create_task(apply_weight_changes(
            pool, [WeightChange(a, "reinforce", RAISE_A, "retrieval", "recalled")], safety=safety))
        await _waiting_for(pool, GOAL_BUDGET_LOCK_KEY, raising)      # it cannot judge the budget while B's change is open
        assert not raising.done()
        await tx.commit()
    finally:
        await pool.release(lowering)
    [raised] = await raising
    # only one of the two passes: the raise is judged against B as committed
    assert raised.blocked_by == "goal_budget"
    assert raised.reason == "goal would hold 42.9% of the goal-weight budget, above the 40% cap"
    rows = await pool.fetch("SELECT id, depth_weight_alpha a, depth_weight_beta b FROM memories ORDER BY id")
    assert [(r["a"], r["b"]) for r in rows] == [(3.0, 7.0), (6.0, 14.0), (5.0, 5.0)]


async def test_without_the_concurrent_change_the_same_raise_passes(pool):
    a = await _goal(pool, 3.0, 7.0)
    await _goal(pool, 6.0, 4.0)
    await _goal(pool, 5.0, 5.0)
    [raised] = await apply_weight_changes(pool, [WeightChange(a, "reinforce", RAISE_A, "retrieval", "recalled")],
                                          safety=Safety())
    assert raised.blocked_by is None and raised.center_after == pytest.approx(0.6)


async def test_changes_to_other_memories_never_wait_for_the_budget(pool):
    goal = await _goal(pool, 3.0, 7.0)
    plain = await _goal(pool, 1.0, 4.0, kind="value")
    holder = await pool.acquire()
    try:
        tx = holder.transaction()
        await tx.start()
        await apply_weight_changes(holder, [WeightChange(goal, "reinforce", 1.0, "retrieval", "recalled")],
                                   safety=Safety())
        # the open goal change holds the budget's lock; a batch without goals goes through
        [out] = await asyncio.wait_for(apply_weight_changes(
            pool, [WeightChange(plain, "reinforce", 1.0, "retrieval", "recalled")], safety=Safety()), 30)
        assert out.blocked_by is None
        await tx.rollback()
    finally:
        await pool.release(holder)
