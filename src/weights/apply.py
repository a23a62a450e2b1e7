"""The one choke point for every change of a memory's Beta weight (plan §3.9).

Retrieval mutation, gate reinforcement, consolidation, promotion and decay all call
`apply_weight_changes`. In one transaction it locks the rows (in id order, so
concurrent batches cannot deadlock), runs the safety ceilings on each change in
order, applies what passed with one set-based UPDATE (`alpha = alpha + delta`), and
writes the audit rows (`consolidation_log`) and any failed checks (`safety_events`).
No other SQL in the codebase touches depth_weight_alpha/beta (a test greps for it).

Diminishing returns (Phase A) apply to reinforcement only: they exist to slow
self-reinforcing loops, and suppression (near-misses, decay) must keep its full
effect or forgetting would stall exactly where weights are largest.

Phase C's circuit breaker (src/weights/patterns.py) sees every reinforcement here, keyed
by actor and memory; while a pattern is tripped its reinforcements that bring no new
evidence are refused (enforced) or logged as ones that would be (shadow).

The goal budget reads the sum over every goal row, not just the batch's: a batch that
touches a goal takes the budget's advisory lock (after its row locks, before that read)
and holds it to commit, so two concurrent goal changes are judged one after the other;
batches without a goal never wait for it.

The guardian's approval line (plan §4.3, src/weights/approval.py; `Safety.approval`): while
trust is below autonomous, a reinforcement that would lift a center past the approval
center is capped just below it and audited as capped — unless its caller holds the line
itself (promotion asks the guardian first). The cap is arithmetic on the locked row, so the
batch stays one UPDATE.

Immutable memories are never changed: their weight is part of what makes them
immutable (bootstrap boundaries start at Beta(50, 1)).

Protected memories (the guardian's /protect) skip forgetting: a change that names
itself decay, demotion or near-miss suppression (`WeightChange.forgetting`) is not
applied to them, and the skip is written to `consolidation_log` (operation
`protected_skip`, applied delta 0) so "why did this not decay?" is plain SQL.
Evidence — a contradiction, a reinforcement — still applies: protection keeps a
memory from fading, not from being corrected.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

import asyncpg

from src.bootstrap.milestones import promotion_milestones
from src.weights import safety_rules as rules
from src.weights.approval import approved_gain
from src.weights.patterns import evidence_ids
from src.weights.safety import Safety, SafetyEvent, insert_safety_events
from src.weights.stochastic import center_after, diminished_gain

Operation = Literal["reinforce", "contradict"]
#: The forgetting mechanisms a protected memory skips.
Forgetting = Literal["decay", "demotion", "near_miss"]
FORGETTING: tuple[str, ...] = ("decay", "demotion", "near_miss")
PROTECTED_SKIP = "protected_skip"
# ACT-R presentations kept per memory; older ones are dropped (their t^-d terms are the
# smallest). access_count keeps the true total.
MAX_ACCESS_TIMESTAMPS = 64
# pg_advisory_xact_lock key of the goal budget ("goalbudg" in ASCII).
GOAL_BUDGET_LOCK_KEY = 0x676F616C62756467


@dataclass(frozen=True)
class WeightChange:
    """A requested change: `amount` evidence units for (reinforce) or against (contradict)."""

    memory_id: int
    operation: Operation
    amount: float
    actor: str                      # retrieval, exit_gate, light_consolidation, promotion, …
    reason: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    # Phase B inputs, given by consolidation: center at the start of its cycle, and
    # the Two-Gate measures of a promotion.
    cycle_baseline_center: float | None = None
    validation_margin: float | None = None
    capacity_used: float | None = None
    # Set by decay, demotion and near-miss suppression: protected memories skip these.
    forgetting: Forgetting | None = None
    # What a reinforcement rests on, for the circuit breaker; empty: `evidence` without its time.
    evidence_ids: tuple[Hashable, ...] = ()
    # The caller holds the guardian's approval line itself (promotion asks before a step
    # passes it): the choke point does not cap this change (src/weights/approval.py).
    approval_checked: bool = False
    # "summary": the batch's applied changes of this kind share one audit row (count, summed
    # delta, id range) instead of one each: the light ticker's decay touches thousands of
    # memories a tick, and keeps each memory's last nudge in memory_decay_marks.
    audit: Literal["row", "summary"] = "row"

    def __post_init__(self) -> None:
        if self.operation not in ("reinforce", "contradict"):
            raise ValueError(f"operation must be 'reinforce' or 'contradict', got {self.operation!r}")
        if self.forgetting is not None and self.forgetting not in FORGETTING:
            raise ValueError(f"forgetting must be one of {', '.join(FORGETTING)}, got {self.forgetting!r}")
        if not self.amount >= 0:
            raise ValueError(f"amount must be >= 0, got {self.amount!r}")


@dataclass(frozen=True)
class WeightOutcome:
    memory_id: int
    operation: Operation
    requested: float
    applied: float                  # 0.0 when blocked
    alpha_before: float
    beta_before: float
    alpha_after: float
    beta_after: float
    blocked_by: str | None = None   # ceiling name, "immutable", "protected" or "missing"
    reason: str = ""

    @property
    def center_after(self) -> float:
        return self.alpha_after / (self.alpha_after + self.beta_after)


@dataclass
class _Row:
    alpha: float
    beta: float
    immutable: bool
    goal: bool
    protected: bool = False
    d_alpha: float = 0.0
    d_beta: float = 0.0


@dataclass(frozen=True)
class AccessTouch:
    """Rows retrieved this cycle: count the access and append an ACT-R presentation."""

    memory_ids: Sequence[int]
    at: datetime


async def apply_weight_changes(
    db: asyncpg.Connection | asyncpg.Pool,
    changes: Sequence[WeightChange],
    *,
    safety: Safety,
    touch: AccessTouch | None = None,
) -> list[WeightOutcome]:
    """Apply `changes` in order under the safety ceilings; outcomes in input order.

    `touch` lets retrieval write its access bookkeeping in the same UPDATE, so a
    retrieved row gets one new version, not two.
    """
    if not changes and not (touch and touch.memory_ids):
        return []
    if isinstance(db, asyncpg.Pool):
        async with db.acquire() as conn:
            return await apply_weight_changes(conn, changes, safety=safety, touch=touch)
    if db.is_in_transaction():
        outcomes = await _apply(db, changes, safety, touch)
    else:
        async with db.transaction():
            outcomes = await _apply(db, changes, safety, touch)
    if any(c.actor == "promotion" for c in changes):
        # readiness milestones 4 and 6 (plan §5.2) are reached where promotion happens: here
        await promotion_milestones(db, changes, outcomes)
    return outcomes


@dataclass
class _Batch:
    """What one batch gathers while its changes are decided in order."""

    goal_total: float | None                  # sum of goal centers, kept current as goals change
    applied: list[tuple] = field(default_factory=list)     # consolidation_log rows
    skipped: list[tuple] = field(default_factory=list)     # protected_skip rows
    events: list[SafetyEvent] = field(default_factory=list)   # this batch's, written by this transaction only


async def _apply(conn: asyncpg.Connection, changes: Sequence[WeightChange], safety: Safety,
                 touch: AccessTouch | None) -> list[WeightOutcome]:
    """Lock the rows, decide each change in order, one UPDATE, then the audit rows and safety events."""
    touched = set(touch.memory_ids) if touch else set()
    rows = await _lock_rows(conn, sorted({c.memory_id for c in changes} | touched))
    batch = _Batch(await _goal_total(conn, changes, rows))
    outcomes = [_decide(change, rows.get(change.memory_id), safety, batch) for change in changes]
    audited = [r for r in batch.applied if r[0].audit == "row"]
    await _update_weights(conn, rows, touched, touch, audited)
    if len(audited) < len(batch.applied):
        await _audit_summary(conn, [r for r in batch.applied if r[0].audit == "summary"])
    if batch.skipped:
        await _audit(conn, batch.skipped, skip=True)
    if batch.events:
        await insert_safety_events(conn, batch.events)
    return outcomes


async def _lock_rows(conn: asyncpg.Connection, ids: list[int]) -> dict[int, _Row]:
    """The rows' weights, locked in id order (so concurrent batches cannot deadlock). FOR NO
    KEY UPDATE, the lock the UPDATE itself takes: another writer's row that references one of
    these memories (a co-access pair, a recall outcome: its foreign key check takes KEY
    SHARE) does not wait behind the weights. With FOR UPDATE, a co-access upsert run beside
    a retrieval's mutation deadlocked with it (tests/test_weight_locks.py)."""
    locked = await conn.fetch(
        """SELECT id, depth_weight_alpha, depth_weight_beta, immutable, protected,
                  COALESCE(metadata->>'kind' = 'goal', false) AS goal
             FROM memories WHERE id = ANY($1::bigint[]) ORDER BY id FOR NO KEY UPDATE""",
        ids,
    )
    return {r["id"]: _Row(r["depth_weight_alpha"], r["depth_weight_beta"], r["immutable"], r["goal"],
                          r["protected"]) for r in locked}


async def _goal_total(conn: asyncpg.Connection, changes: Sequence[WeightChange],
                      rows: Mapping[int, _Row]) -> float | None:
    """The goals' summed centers, for the goal budget; None when no change touches a goal.

    Under the budget's lock: the sum is read after any other goal change has committed."""
    if not any(rows.get(c.memory_id) and rows[c.memory_id].goal for c in changes):
        return None
    await conn.execute("SELECT pg_advisory_xact_lock($1)", GOAL_BUDGET_LOCK_KEY)
    return await conn.fetchval(
        """SELECT COALESCE(sum(depth_weight_alpha / (depth_weight_alpha + depth_weight_beta)), 0)
             FROM memories WHERE metadata->>'kind' = 'goal'""")


def _decide(change: WeightChange, row: _Row | None, safety: Safety, batch: _Batch) -> WeightOutcome:
    """One change against its row as the batch's earlier changes left it: refused (missing,
    immutable, protected from forgetting, blocked by a ceiling) or added to the row's delta."""
    if row is None:
        return WeightOutcome(change.memory_id, change.operation, change.amount, 0.0,
                             0.0, 0.0, 0.0, 0.0, "missing", "no such memory")
    a0, b0 = row.alpha + row.d_alpha, row.beta + row.d_beta

    def refused(by: str, why: str) -> WeightOutcome:
        return WeightOutcome(change.memory_id, change.operation, change.amount, 0.0, a0, b0, a0, b0, by, why)

    if row.immutable:
        return refused("immutable", "immutable memories keep their weight")
    if row.protected and change.forgetting is not None:
        batch.skipped.append((change, 0.0, a0, b0, a0, b0))
        return refused("protected", f"protected from forgetting: {change.forgetting} skipped")
    audited = change
    if change.operation == "reinforce":
        audited, delta = _under_approval_line(change, safety, a0, b0, diminished_gain(change.amount, a0 + b0))
        da, db_ = delta, 0.0
    else:
        delta = change.amount
        da, db_ = 0.0, delta
    new_center = center_after(a0, b0, da, db_)
    blocked = _check(safety, change, row, a0, b0, new_center, batch.goal_total, batch.events)
    if blocked is not None:
        return refused(*blocked)
    if row.goal and batch.goal_total is not None:
        batch.goal_total += new_center - a0 / (a0 + b0)
    row.d_alpha += da
    row.d_beta += db_
    batch.applied.append((audited, delta, a0, b0, a0 + da, b0 + db_))
    return WeightOutcome(change.memory_id, change.operation, change.amount, delta, a0, b0, a0 + da, b0 + db_)


def _under_approval_line(change: WeightChange, safety: Safety, a0: float, b0: float,
                         gain: float) -> tuple[WeightChange, float]:
    """The reinforcement's gain under the guardian's approval line (src/weights/approval.py),
    and the change as its audit row tells it: a capped one says so in its reason and
    evidence. The checks and the circuit breaker still see the change as it was asked."""
    line = safety.approval
    if line is None or change.approval_checked:
        return change, gain
    allowed = approved_gain(a0, b0, gain, line)
    if allowed >= gain:
        return change, gain
    return replace(change, reason=f"{change.reason}; capped below the approval line {line.center:g} "
                                  f"(trust level {line.trust_level} < {line.trust_level_autonomous})",
                   evidence={**change.evidence, **line.evidence(gain)}), allowed


#: The set-based weight UPDATE; its parameters numbered from 12, after the audit INSERT's
#: 11 it is sent with (`_update_weights`).
_UPDATE_WEIGHTS = """UPDATE memories m
      SET depth_weight_alpha = m.depth_weight_alpha + d.da,
          depth_weight_beta  = m.depth_weight_beta + d.db,
          access_count  = m.access_count + d.touch::int,
          last_accessed = CASE WHEN d.touch THEN $16 ELSE m.last_accessed END,
          access_timestamps = CASE WHEN d.touch
              THEN (m.access_timestamps || $16::timestamptz)[cardinality(m.access_timestamps) + 2 - $17:]
              ELSE m.access_timestamps END
     FROM unnest($12::bigint[], $13::float8[], $14::float8[], $15::bool[]) AS d(id, da, db, touch)
    WHERE m.id = d.id"""


async def _update_weights(conn: asyncpg.Connection, rows: Mapping[int, _Row], touched: set[int],
                          touch: AccessTouch | None, audited: list[tuple]) -> None:
    """One statement: every row's summed delta, the access bookkeeping of the retrieved ones
    (one new row version each, not two) and the `audited` changes' consolidation_log rows
    (one round trip fewer in every retrieval's transaction)."""
    changed = [(mid, r) for mid, r in rows.items() if r.d_alpha or r.d_beta or mid in touched]
    if not changed:
        if audited:
            await _audit(conn, audited)
        return
    await conn.execute(
        f"WITH weights AS ({_UPDATE_WEIGHTS}) {_AUDIT_SQL}", *_audit_args(audited),
        [mid for mid, _ in changed], [r.d_alpha for _, r in changed], [r.d_beta for _, r in changed],
        [mid in touched for mid, _ in changed], touch.at if touch else None, MAX_ACCESS_TIMESTAMPS,
    )


def _check(safety: Safety, change: WeightChange, row: _Row, a0: float, b0: float,
           new_center: float, goal_total: float | None, events: list[SafetyEvent]) -> tuple[str, str] | None:
    """Run every ceiling that applies; the first enforced failure blocks the change."""
    s = safety.settings
    action = {"actor": change.actor, "operation": change.operation, "amount": change.amount,
              "alpha_before": a0, "beta_before": b0, "center_after": round(new_center, 6)}
    checks: list[tuple[Any, rules.RuleResult]] = []
    if change.operation == "reinforce":
        checks.append((safety.hard_ceiling, rules.hard_ceiling(new_center, row.immutable, s.center_ceiling)))
        if row.goal and goal_total:
            before = a0 / (a0 + b0)
            share_after = min(1.0, (new_center / (goal_total - before + new_center)))
            share_before = min(1.0, before / goal_total)
            # The budget restrains concentration: a share that does not grow (a lone goal
            # holds 100% and always will) is not a violation.
            if share_after > share_before:
                checks.append((safety.goal_budget, rules.goal_budget(share_after, s.goal_budget_share)))
    if change.cycle_baseline_center is not None:
        checks.append((safety.rate_limit, rules.rate_limit(change.cycle_baseline_center, new_center,
                                                           s.max_center_change_per_cycle)))
    if change.validation_margin is not None or change.capacity_used is not None:
        checks.append((safety.two_gate, rules.two_gate(
            change.validation_margin if change.validation_margin is not None else float("-inf"),
            s.two_gate_min_margin,
            change.capacity_used if change.capacity_used is not None else float("inf"),
            s.two_gate_capacity_cap)))
    blocked = None
    for ceiling, result in checks:
        passed, reason = ceiling.check(result, memory_id=change.memory_id, action=action, events=events)
        if not passed and blocked is None:
            blocked = (ceiling.name, reason)
    if change.operation == "reinforce":
        passed, reason = safety.check_pattern(change.actor, change.memory_id,
                                              evidence_ids(change.evidence_ids, change.evidence), events=events)
        if not passed and blocked is None:
            blocked = (safety.circuit.name, reason)
    return blocked


_AUDIT_SQL = """INSERT INTO consolidation_log (memory_id, operation, actor, reason, requested_delta, applied_delta,
                                      alpha_before, beta_before, alpha_after, beta_after, evidence)
       SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::float8[], $6::float8[],
                            $7::float8[], $8::float8[], $9::float8[], $10::float8[], $11::jsonb[])"""


async def _audit(conn: asyncpg.Connection, log_rows: list[tuple], *, skip: bool = False) -> None:
    """consolidation_log rows; `skip`: changes a protected memory skipped (applied delta 0)."""
    await conn.execute(_AUDIT_SQL, *_audit_args(log_rows, skip=skip))


def _audit_args(log_rows: list[tuple], *, skip: bool = False) -> tuple:
    """_AUDIT_SQL's 11 parameters for `log_rows` (change, delta, alpha/beta before and after)."""
    if skip:
        operations = [PROTECTED_SKIP] * len(log_rows)
        reasons = [f"protected from forgetting: {c.forgetting} ({c.operation} {c.amount:g}) skipped; {c.reason}"
                   for c, *_ in log_rows]
        evidence = [dict(c.evidence) | {"skipped": c.operation, "forgetting": c.forgetting} for c, *_ in log_rows]
    else:
        operations = [c.operation for c, *_ in log_rows]
        reasons = [c.reason for c, *_ in log_rows]
        evidence = [dict(c.evidence) for c, *_ in log_rows]
    return ([c.memory_id for c, *_ in log_rows], operations,
            [c.actor for c, *_ in log_rows], reasons,
            [c.amount for c, *_ in log_rows], [r[1] for r in log_rows],
            [r[2] for r in log_rows], [r[3] for r in log_rows], [r[4] for r in log_rows], [r[5] for r in log_rows],
            [json.dumps(e, default=str) for e in evidence])


async def _audit_summary(conn: asyncpg.Connection, log_rows: list[tuple]) -> None:
    """One consolidation_log row per (actor, operation, reason) of summary-audited changes."""
    groups: dict[tuple[str, str, str], list[tuple]] = {}
    for r in log_rows:
        groups.setdefault((r[0].actor, r[0].operation, r[0].reason), []).append(r)
    await conn.executemany(
        """INSERT INTO consolidation_log (memory_id, operation, actor, reason, requested_delta, applied_delta, evidence)
           VALUES (NULL, $1, $2, $3, $4, $5, $6::jsonb)""",
        [(op, actor, reason, sum(c.amount for c, *_ in rs), sum(r[1] for r in rs),
          json.dumps({"summary": True, "memories": len(rs), "first_id": min(c.memory_id for c, *_ in rs),
                      "last_id": max(c.memory_id for c, *_ in rs)}))
         for (actor, op, reason), rs in groups.items()])
