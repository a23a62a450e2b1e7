"""Promotion (plan §4.3): repeated patterns move toward goal and identity weight.

What "a pattern seen" is. A memory is a pattern; each *sighting* is a time it came
back: a retrieval (its ACT-R presentations, `access_timestamps`), a confirmation by
the exit gate (a `reinforce` by `exit_gate` in `consolidation_log`: the same thing
was said again), and, for an insight, every retrieval of the memories it supersedes
(its cluster). Seen `goal_sightings` times over `goal_span_days` between the first and
the last sighting -> the goal tier; `identity_sightings` over `identity_span_days` ->
the identity tier. Each tier is granted once per memory (`promotions`); a memory that
qualifies for identity straight away gets identity only.

A memory a newer statement updated (sql/153) fades (issue 37 item 5): it is never
promoted, a climb it was granted stops, and an approval still waiting for it is refused
(`apply_approved`). An update link lends no sightings either way (promotions_repository.py
says why).

What a grant does. It sets a target center inside the tier's range (promotion_targets.py:
the plan's amounts alone stop short of the ranges) and the memory climbs to it, one step
per deep pass; a grant still climbing is *owed* (`remaining` > 0) and takes its step
before new grants. A step that does not apply (a guard refused it) keeps the grant: the
next pass tries again.

Safety, in order, for every step:
1. Rate limit (Phase B): the center may move `max_center_change_per_cycle` per pass
   from where it stood when the pass began. Enforced, a step goes that far at most;
   in shadow mode it goes to the target and the limiter only logs.
2. Operator approval: a step whose center would pass `approval_center` while
   `trust_level` < `trust_level_autonomous` waits in `approvals` (/approve ID); once
   approved, the rest of that promotion's climb needs no second approval.
3. In the weight choke point: the hard ceiling, diminishing returns, the Two-Gate
   guardrail (Phase B: validation margin = the memory's Q-value utility, capacity = the
   share of the tier's capacity the memory would fill) and the circuit breaker (Phase C:
   the pattern promotion/#memory, its evidence the sightings, so a climb that goes on
   `circuit_breaker_cycles` passes with no new sighting pauses while C is enforced).
4. CBA coherence after the change, in the same transaction: a drop beyond
   `safety.coherence_tolerance` rolls the step back (savepoint). The rollback is
   promotion's own rule (§4.3), so it holds whether Phase C is enforced or in shadow;
   the event is written with Phase C's mode.
And before any of it: while Phase C's coherence monitor has paused promotion
(`Safety.promotion_paused`, enforced only), a pass promotes nothing.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import asyncpg

from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.consolidation.evolution import approval_kinds, approvals_repository
from src.consolidation.evolution import promotions_repository as repo
from src.consolidation.evolution.promotion_targets import (
    CEILING_MARGIN,
    amount_to_center,
    eligible_tier,
    predicted_center,
    step_aim,
    tier_target,
)
from src.consolidation.evolution.settings import EvolutionSettings, PromotionSettings, evolution_of
from src.weights import safety_rules as rules
from src.weights.apply import WeightChange, apply_weight_changes
from src.weights.safety import Safety, SafetyEvent, insert_safety_events
from src.weights.self_kinds import TIER_KINDS, tag_promoted, untag

log = logging.getLogger(__name__)

DAY_S = 86400.0
__all__ = ["eligible_tier", "predicted_center", "promote", "run_promotion"]


@dataclass(frozen=True)
class Coherence:
    """Counts behind the CBA axes; `with_change` updates them for one weight change."""

    goal_center: float
    identity_center: float
    informed: int
    contested: int
    value_std_sum: float
    values_n: int
    actions: int
    tensions: int

    @property
    def c(self) -> float:
        epistemic = 1.0 if self.informed == 0 else 1.0 - self.contested / self.informed
        value = 1.0 if self.values_n == 0 else 1.0 - min(1.0, (self.value_std_sum / self.values_n)
                                                        / rules.UNIFORM_STD)
        action = rules.action_coherence(max(0, self.actions - self.tensions), self.actions)
        return rules.cba_coherence(max(0.0, epistemic), action, max(0.0, value))

    def with_change(self, a0: float, b0: float, a1: float, b1: float) -> Coherence:
        s = self
        for a, b, sign in ((a0, b0, -1), (a1, b1, 1)):
            center = a / (a + b)
            if center < self.goal_center:
                continue
            s = replace(s, informed=s.informed + sign * (not (a < 2 and b < 2)),
                        contested=s.contested + sign * (a > 5 and b > 5))
            if center >= self.identity_center:
                std = math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
                s = replace(s, value_std_sum=s.value_std_sum + sign * std, values_n=s.values_n + sign)
        return s


async def load_coherence(db: repo.Executor, now: datetime, cfg: PromotionSettings) -> Coherence:
    row = await repo.coherence_counts(db, now, cfg.goal_center, cfg.identity_center)
    return Coherence(cfg.goal_center, cfg.identity_center, row["informed"], row["contested"],
                     float(row["value_std_sum"]), row["values_n"], row["actions"], row["tensions"])


@dataclass
class PromotionState:
    """What one pass carries between promotions: tier occupancy and coherence."""

    occupancy: dict[str, int]
    coherence: Coherence


@dataclass(frozen=True)
class Step:
    """One promotion step: a new grant, or the next stretch of a granted climb."""

    memory_id: int
    tier: str
    target: float                      # the center the promotion leads to (promotion_targets.tier_target)
    alpha: float
    beta: float
    utility: float
    evidence: dict
    continued: bool = False            # a granted promotion still climbing, not a new grant
    approved: bool = False             # the operator approved this promotion: no second approval
    sightings: tuple[str, ...] = field(default=())   # the circuit breaker's evidence ids


def _sightings_id(tier: str, r: asyncpg.Record) -> tuple[str, ...]:
    """What a step rests on, for the circuit breaker: its tier and the sightings so far
    (a new sighting, or the next tier, is new evidence)."""
    return (f"{tier}: {r['n']} sightings, last {r['last_at'].isoformat()}",)


async def _steps(pool: asyncpg.Pool, cfg: PromotionSettings, now: datetime) -> list[Step]:
    """This pass's steps: the climbs still owed first, then the newly qualifying patterns."""
    owed = await repo.promotions_owed(pool, cfg.max_per_pass, cfg.goal_target, cfg.identity_target)
    candidates = await repo.promotion_candidates(pool, now, cfg.goal_sightings, cfg.max_per_pass,
                                                 [r["memory_id"] for r in owed])
    by_id = {r["memory_id"]: r for r in candidates}
    steps = [Step(r["memory_id"], r["tier"], r["target"], r["alpha"], r["beta"], r["utility_score"],
                  {"owed": round(r["remaining"], 6)}, continued=True, approved=r["approval_id"] is not None,
                  sightings=(_sightings_id(r["tier"], by_id[r["memory_id"]]) if r["memory_id"] in by_id
                             else (f"{r['tier']}: no sightings",)))
             for r in owed]
    seen = {s.memory_id for s in steps}
    for r in candidates:
        span = (r["last_at"] - r["first_at"]).total_seconds() / DAY_S
        tier = eligible_tier(r["n"], span, r["has_goal"], r["has_identity"], cfg)
        if tier is None or r["memory_id"] in seen:
            continue
        steps.append(Step(r["memory_id"], tier, tier_target(tier, r["alpha"], r["beta"], cfg), r["alpha"],
                          r["beta"], r["utility_score"],
                          {"sightings": r["n"], "span_days": round(span, 2),
                           "first": r["first_at"].isoformat(), "last": r["last_at"].isoformat()},
                          sightings=_sightings_id(tier, r)))
    return steps[:cfg.max_per_pass]


async def run_promotion(pool: asyncpg.Pool, safety: Safety, settings: EvolutionSettings, now: datetime,
                        counts: dict[str, int], baselines: dict[int, float] | None = None) -> None:
    """One pass of §4.3: owed climbs first, then newly qualifying patterns.

    `baselines`: the pass's centers at the first change of each memory (the deep pass's
    `baseline_centers`), so the rate limit counts earlier phases' changes too.
    """
    if safety.promotion_paused:
        counts["promotion_paused"] = 1
        log.info("promotion paused this pass: Phase C's coherence monitor saw a drop (safety_events)")
        return
    baselines = {} if baselines is None else baselines
    cfg = settings.promotion
    goal_n, identity_n = await repo.tier_occupancy(pool, cfg.goal_center, cfg.identity_center)
    state = PromotionState({"goal": goal_n, "identity": identity_n}, await load_coherence(pool, now, cfg))
    for step in await _steps(pool, cfg, now):
        baseline = baselines.setdefault(step.memory_id, step.alpha / (step.alpha + step.beta))
        status = await promote(pool, safety, settings, now, step, state, baseline=baseline)
        counts[f"promotion_{status}"] = counts.get(f"promotion_{status}", 0) + 1


async def promote(db: repo.Executor, safety: Safety, settings: EvolutionSettings, now: datetime, step: Step,
                  state: PromotionState, *, approval_id: int | None = None, baseline: float | None = None) -> str:
    """One promotion step under every check; returns applied | reached | waiting |
    pending_approval | blocked | rolled_back. A step the operator approved (`step.approved`)
    asks for no second approval.

    `db` a pool: each step commits on its own; a connection: the step joins its open
    transaction (an approval's, so the promotion and the decision commit together)."""
    cfg = settings.promotion
    s = safety.settings
    center = step.alpha / (step.alpha + step.beta)
    reach = min(step.target, s.center_ceiling - CEILING_MARGIN)     # a target above the ceiling stops below it
    aim = step_aim(reach, center if baseline is None else baseline, max_change=s.max_center_change_per_cycle,
                   ceiling=s.center_ceiling, rate_limited=s.phase_b == "enforced")
    amount = round(amount_to_center(step.alpha, step.beta, aim), 9)
    evidence = {**step.evidence, "at": now.isoformat(), "tier": step.tier, "target": round(step.target, 6),
                "step_amount": amount, "utility": step.utility}
    async with _connection(db) as conn:
        if amount <= 0:
            return await _nothing_to_do(conn, step, center >= reach - 1e-9, aim, now, evidence)
        predicted = predicted_center(step.alpha, step.beta, amount)
        if (not step.approved and predicted > cfg.approval_center
                and cfg.trust_level < cfg.trust_level_autonomous):
            return await _ask_approval(conn, step, predicted, amount, cfg, now, evidence)
        tier_center = cfg.identity_center if step.tier == "identity" else cfg.goal_center
        joins = center < tier_center <= predicted
        capacity = cfg.identity_capacity if step.tier == "identity" else cfg.goal_capacity
        change = WeightChange(step.memory_id, "reinforce", amount, "promotion", f"{step.tier} promotion",
                              evidence, cycle_baseline_center=baseline, validation_margin=step.utility,
                              capacity_used=(state.occupancy[step.tier] + (1 if joins else 0)) / capacity,
                              evidence_ids=step.sightings, approval_checked=True)   # asked above
        status = await _step(conn, safety, change, replace(step, target=reach), state, now, approval_id)
        if status == "applied" and joins:
            state.occupancy[step.tier] += 1
        return status


async def _step(conn: asyncpg.Connection, safety: Safety, change: WeightChange, step: Step,
                state: PromotionState, now: datetime, approval_id: int | None) -> str:
    """Apply one step and record it, in one transaction with this step's safety events."""
    events: list[SafetyEvent] = []   # this promotion's, written by its own transaction
    async with conn.transaction():
        status, reason, after = await _apply_checked(conn, safety, change, state, events, tier=step.tier, now=now)
        if after is not None:
            await repo.record_promotion(conn, repo.PromotionRecord(
                step.memory_id, step.tier, "applied", now, reason, remaining=_owed(*after, step.target),
                approval_id=approval_id, evidence=change.evidence, target=step.target))
        elif step.continued:
            await repo.note_stalled_step(conn, step.memory_id, step.tier, f"climb stalled: {reason}",
                                         change.evidence)
        else:
            await repo.record_promotion(conn, repo.PromotionRecord(
                step.memory_id, step.tier, status, now, reason, remaining=_owed(step.alpha, step.beta, step.target),
                approval_id=approval_id, evidence=change.evidence, target=step.target))
        if events:
            await insert_safety_events(conn, events)
    return status


def _owed(alpha: float, beta: float, target: float) -> float:
    """The reinforcement still owed to reach `target` (a float remainder below 1e-6 is none)."""
    amount = amount_to_center(alpha, beta, target)
    return amount if amount > 1e-6 else 0.0


async def _nothing_to_do(conn: asyncpg.Connection, step: Step, reached: bool, aim: float, now: datetime,
                         evidence: dict) -> str:
    """No reinforcement to ask for: the climb is over (`reached`), or this pass's rate limit
    is spent by earlier changes (`waiting`; a new grant is then not made this pass)."""
    if reached and step.continued:
        await repo.record_promotion(conn, repo.PromotionRecord(
            step.memory_id, step.tier, "applied", now, f"reached its target {step.target:.3f}", remaining=0.0,
            evidence=evidence))
        return "reached"
    if step.continued:
        await repo.note_stalled_step(conn, step.memory_id, step.tier,
                                     f"climb waits: this pass's rate limit is spent (aim {aim:.3f})", evidence)
        return "waiting"
    return "blocked"


async def _ask_approval(conn: asyncpg.Connection, step: Step, predicted: float, amount: float,
                        cfg: PromotionSettings, now: datetime, evidence: dict) -> str:
    """The step would pass `approval_center` at low trust: queue it for the operator."""
    async with conn.transaction():
        reason = (f"{step.tier} promotion would lift memory {step.memory_id} to center "
                  f"{predicted:.3f} (> {cfg.approval_center:g}) at trust level {cfg.trust_level}")
        aid = await approvals_repository.insert_approval(conn, "promotion", {
            "memory_id": step.memory_id, "tier": step.tier, "target": step.target, "amount": amount,
            "predicted_center": round(predicted, 4), **step.evidence}, reason, now)
        await repo.record_promotion(conn, repo.PromotionRecord(
            step.memory_id, step.tier, "pending_approval", now, reason,
            remaining=_owed(step.alpha, step.beta, step.target), approval_id=aid, evidence=evidence,
            target=step.target))
    log.info("promotion of memory %d waits for approval %d: %s", step.memory_id, aid, reason)
    return "pending_approval"


@asynccontextmanager
async def _connection(db: repo.Executor) -> AsyncIterator[asyncpg.Connection]:
    """`db` itself when it is a connection (its transaction holds), else one from the pool."""
    if isinstance(db, asyncpg.Pool):
        async with db.acquire() as conn:
            yield conn
    else:
        yield db


class _Rollback(Exception):
    pass


async def _apply_checked(conn: asyncpg.Connection, safety: Safety, change: WeightChange, state: PromotionState,
                         events: list[SafetyEvent], *, tier: str,
                         now: datetime) -> tuple[str, str, tuple[float, float] | None]:
    """Apply in a savepoint; roll it back when coherence drops beyond tolerance.
    (status, reason, the weight after when applied)."""
    tolerance = safety.settings.coherence_tolerance
    try:
        async with conn.transaction():
            # the tier's kind first, so that a memory becoming a goal meets the goal budget
            # (issue 40); a refused step takes its tag back (its safety event stays)
            before = await tag_promoted(conn, change.memory_id, tier, now)
            outcome = (await apply_weight_changes(conn, [change], safety=safety))[0]
            if outcome.blocked_by is not None:
                if before is not None:
                    await untag(conn, change.memory_id, before)
                return "blocked", f"blocked by {outcome.blocked_by}: {outcome.reason}", None
            if before is not None:
                log.info("memory %d promoted into the %s tier: now a %s", change.memory_id, tier,
                         TIER_KINDS[tier])
            after = state.coherence.with_change(outcome.alpha_before, outcome.beta_before,
                                                outcome.alpha_after, outcome.beta_after)
            dropped = rules.coherence_dropped(state.coherence.c, after.c, tolerance)
            safety.coherence.check(dropped, memory_id=change.memory_id,
                                   action={"actor": "promotion", "C_before": round(state.coherence.c, 4),
                                           "C_after": round(after.c, 4)}, events=events)
            if not dropped.passed:
                raise _Rollback(dropped.reason)
            state.coherence = after
            return ("applied", f"reinforced by {outcome.applied:.3f}; center {outcome.center_after:.3f}",
                    (outcome.alpha_after, outcome.beta_after))
    except _Rollback as exc:
        log.info("promotion of memory %d rolled back: %s", change.memory_id, exc)
        return "rolled_back", f"rolled back: {exc}", None


async def apply_approved(ctx: approval_kinds.ApprovalContext, payload: Mapping[str, Any]) -> approval_kinds.Applied:
    """The operator approved a waiting promotion: run it now, every other check still on."""
    memory_id, tier = int(payload["memory_id"]), str(payload["tier"])
    row = await ctx.db.fetchrow(
        "SELECT depth_weight_alpha AS a, depth_weight_beta AS b, utility_score FROM memories WHERE id = $1",
        memory_id)
    if row is None:
        return approval_kinds.Applied(False, f"memory {memory_id} no longer exists")
    newer = await repo.updated_by(ctx.db, memory_id)
    if newer is not None:
        # approved before a newer statement updated it: an earlier fact is not promoted
        return approval_kinds.Applied(False, f"memory {memory_id} was since updated by #{newer}: not promoted")
    cfg = ctx.settings.promotion
    goal_n, identity_n = await repo.tier_occupancy(ctx.db, cfg.goal_center, cfg.identity_center)
    state = PromotionState({"goal": goal_n, "identity": identity_n},
                           await load_coherence(ctx.db, ctx.now, cfg))
    # approvals queued before targets (sql/125) name only an amount: its center is the target
    target = float(payload.get("target") or predicted_center(row["a"], row["b"], float(payload["amount"])))
    step = Step(memory_id, tier, target, row["a"], row["b"], row["utility_score"],
                {"approved": payload.get("approval_id")}, approved=True)
    # in the approval's transaction (ctx.db): applied and decided together, or neither
    status = await promote(ctx.db, ctx.safety, ctx.settings, ctx.now, step, state,
                           approval_id=payload.get("approval_id"))
    after = await ctx.db.fetchrow(
        "SELECT depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) AS c FROM memories WHERE id = $1",
        memory_id)
    return approval_kinds.Applied(status == "applied",
                             f"{tier} promotion of memory {memory_id}: {status}, center now {after['c']:.3f}")


async def _rejected(conn: asyncpg.Connection, approval_id: int, payload: Mapping[str, Any], now: datetime) -> None:
    await repo.record_promotion(conn, repo.PromotionRecord(
        int(payload["memory_id"]), str(payload["tier"]), "rejected", now,
        f"rejected by the operator (approval #{approval_id})", remaining=0.0))


approval_kinds.register("promotion", apply_approved)
approval_kinds.on_reject("promotion", _rejected)


async def run(ctx: DeepPassContext) -> PhaseResult:
    """Deep-pass phase: promotion (§4.3)."""
    result = PhaseResult()
    await run_promotion(ctx.pool, ctx.safety, evolution_of(ctx), ctx.now, result.counts, ctx.baseline_centers)
    return result
