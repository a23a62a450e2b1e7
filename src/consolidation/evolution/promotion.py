"""Promotion (plan §4.3): repeated patterns move toward goal and identity weight.

What "a pattern seen" is. A memory is a pattern; each *sighting* is a time it came
back: a retrieval (its ACT-R presentations, `access_timestamps`), a confirmation by
the exit gate (a `reinforce` by `exit_gate` in `consolidation_log`: the same thing
was said again), and, for an insight, every retrieval of the memories it supersedes
(its cluster). Seen `goal_sightings` (5) times with `goal_span_days` (14) between the
first and the last sighting -> `reinforce(2.0)`, the goal tier; `identity_sightings`
(10) over `identity_span_days` (30) -> `reinforce(5.0)`, the identity tier. Each tier
is granted once per memory (`promotions`); a memory that qualifies for identity
straight away gets identity only.

Safety, in order, for every promotion step:
1. Rate limit (Phase B): the center may move `max_center_change_per_cycle` per pass
   from where it stood when the pass began. When Phase B is enforced the step is the
   largest amount that stays inside that limit; the rest is owed (`remaining`) and
   arrives in later passes. In shadow mode the whole amount applies and the limiter
   only logs.
2. Operator approval: a step whose center would pass `approval_center` (0.85) while
   `trust_level` < `trust_level_autonomous` waits in `approvals` (/approve ID).
3. Two-Gate guardrail (Phase B), in the weight choke point: validation margin = the
   memory's Q-value utility (outcomes must not be net negative), capacity = the share
   of the tier's capacity the memory would fill.
4. CBA coherence after the change, in the same transaction: a drop beyond
   `safety.coherence_tolerance` rolls the promotion back (savepoint). The rollback is
   promotion's own rule (§4.3), so it holds whether Phase C is enforced or in shadow;
   the event is written with Phase C's mode.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import asyncpg

from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.consolidation.evolution import approval_kinds, approvals_repository
from src.consolidation.evolution import promotions_repository as repo
from src.consolidation.evolution.settings import EvolutionSettings, PromotionSettings, evolution_of
from src.weights import safety_rules as rules
from src.weights.apply import WeightChange, apply_weight_changes
from src.weights.safety import Safety, SafetyEvent, insert_safety_events
from src.weights.stochastic import center_after, diminished_gain

log = logging.getLogger(__name__)

DAY_S = 86400.0


def eligible_tier(sightings: int, span_days: float, has_goal: bool, has_identity: bool,
                  cfg: PromotionSettings) -> str | None:
    """The tier a pattern qualifies for now, or None (each tier once, identity subsumes goal)."""
    if has_identity:
        return None
    if sightings >= cfg.identity_sightings and span_days >= cfg.identity_span_days:
        return "identity"
    if not has_goal and sightings >= cfg.goal_sightings and span_days >= cfg.goal_span_days:
        return "goal"
    return None


def predicted_center(alpha: float, beta: float, amount: float) -> float:
    """Center after reinforce(amount) through diminishing returns, as the choke point computes it."""
    return center_after(alpha, beta, diminished_gain(amount, alpha + beta), 0.0)


def rate_limited_amount(amount: float, alpha: float, beta: float, baseline_center: float,
                        max_change: float) -> float:
    """The largest reinforce amount <= `amount` that keeps the center within `max_change`
    of `baseline_center` (the inverse of diminishing returns and of the Beta mean)."""
    target = baseline_center + max_change * 0.999          # a hair inside: float rounding
    if target >= 1.0 or predicted_center(alpha, beta, amount) <= target:
        return amount
    if alpha / (alpha + beta) >= target:
        return 0.0
    gain = (target * (alpha + beta) - alpha) / (1.0 - target)
    return min(amount, gain * max(1.0, math.log2(alpha + beta + 1.0)))


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
    memory_id: int
    tier: str
    amount: float                      # what is owed (the tier's amount, or the rest of it)
    alpha: float
    beta: float
    utility: float
    evidence: dict


async def run_promotion(pool: asyncpg.Pool, safety: Safety, settings: EvolutionSettings, now: datetime,
                        counts: dict[str, int], baselines: dict[int, float] | None = None) -> None:
    """One pass of §4.3: owed promotions first, then newly qualifying patterns.

    `baselines`: the pass's centers at the first change of each memory (the deep pass's
    `baseline_centers`), so the rate limit counts earlier phases' changes too.
    """
    baselines = {} if baselines is None else baselines
    cfg = settings.promotion
    goal_n, identity_n = await repo.tier_occupancy(pool, cfg.goal_center, cfg.identity_center)
    state = PromotionState({"goal": goal_n, "identity": identity_n}, await load_coherence(pool, now, cfg))
    steps = [Step(r["memory_id"], r["tier"], r["remaining"], r["alpha"], r["beta"], r["utility_score"],
                  {"owed": r["remaining"]})
             for r in await repo.promotions_owed(pool, cfg.max_per_pass)]
    seen = {s.memory_id for s in steps}
    for r in await repo.promotion_candidates(pool, now, cfg.goal_sightings, cfg.max_per_pass):
        span = (r["last_at"] - r["first_at"]).total_seconds() / DAY_S
        tier = eligible_tier(r["n"], span, r["has_goal"], r["has_identity"], cfg)
        if tier is None or r["memory_id"] in seen:
            continue
        amount = cfg.identity_amount if tier == "identity" else cfg.goal_amount
        steps.append(Step(r["memory_id"], tier, amount, r["alpha"], r["beta"], r["utility_score"],
                          {"sightings": r["n"], "span_days": round(span, 2),
                           "first": r["first_at"].isoformat(), "last": r["last_at"].isoformat()}))
    for step in steps[:cfg.max_per_pass]:
        baseline = baselines.setdefault(step.memory_id, step.alpha / (step.alpha + step.beta))
        status = await promote(pool, safety, settings, now, step, state, baseline=baseline)
        counts[f"promotion_{status}"] = counts.get(f"promotion_{status}", 0) + 1


async def promote(pool: asyncpg.Pool, safety: Safety, settings: EvolutionSettings, now: datetime, step: Step,
                  state: PromotionState, *, approved: bool = False, approval_id: int | None = None,
                  baseline: float | None = None) -> str:
    """One promotion step under every check; returns applied | pending_approval | blocked | rolled_back."""
    cfg = settings.promotion
    s = safety.settings
    center = step.alpha / (step.alpha + step.beta)
    baseline = center if baseline is None else baseline
    amount = step.amount
    if s.phase_b == "enforced":
        amount = rate_limited_amount(step.amount, step.alpha, step.beta, baseline, s.max_center_change_per_cycle)
    evidence = {**step.evidence, "at": now.isoformat(), "tier": step.tier, "requested": step.amount,
                "step_amount": round(amount, 6), "utility": step.utility}
    if amount <= 0:
        return "blocked"
    predicted = predicted_center(step.alpha, step.beta, amount)
    async with pool.acquire() as conn:
        if not approved and predicted > cfg.approval_center and cfg.trust_level < cfg.trust_level_autonomous:
            async with conn.transaction():
                reason = (f"{step.tier} promotion would lift memory {step.memory_id} to center "
                          f"{predicted:.3f} (> {cfg.approval_center:g}) at trust level {cfg.trust_level}")
                aid = await approvals_repository.insert_approval(conn, "promotion", {
                    "memory_id": step.memory_id, "tier": step.tier, "amount": step.amount,
                    "predicted_center": round(predicted, 4), **step.evidence}, reason, now)
                await repo.record_promotion(conn, step.memory_id, step.tier, "pending_approval", now, reason,
                                            remaining=step.amount, approval_id=aid, evidence=evidence)
            log.info("promotion of memory %d waits for approval %d: %s", step.memory_id, aid, reason)
            return "pending_approval"
        occupied = state.occupancy[step.tier]
        tier_center = cfg.identity_center if step.tier == "identity" else cfg.goal_center
        joins = center < tier_center <= predicted
        capacity = cfg.identity_capacity if step.tier == "identity" else cfg.goal_capacity
        change = WeightChange(step.memory_id, "reinforce", amount, "promotion", f"{step.tier} promotion",
                              evidence, cycle_baseline_center=baseline, validation_margin=step.utility,
                              capacity_used=(occupied + (1 if joins else 0)) / capacity)
        events: list[SafetyEvent] = []   # this promotion's, written by its own transaction
        async with conn.transaction():
            status, reason = await _apply_checked(conn, safety, change, state, events)
            remaining = step.amount - amount if status == "applied" else step.amount
            await repo.record_promotion(conn, step.memory_id, step.tier, status, now, reason,
                                        remaining=max(0.0, remaining), approval_id=approval_id,
                                        evidence=evidence)
            if events:
                await insert_safety_events(conn, events)
        if status == "applied" and joins:
            state.occupancy[step.tier] += 1
        return status


class _Rollback(Exception):
    pass


async def _apply_checked(conn: asyncpg.Connection, safety: Safety, change: WeightChange,
                         state: PromotionState, events: list[SafetyEvent]) -> tuple[str, str]:
    """Apply in a savepoint; roll it back when coherence drops beyond tolerance."""
    tolerance = safety.settings.coherence_tolerance
    try:
        async with conn.transaction():
            outcome = (await apply_weight_changes(conn, [change], safety=safety))[0]
            if outcome.blocked_by is not None:
                return "blocked", f"blocked by {outcome.blocked_by}: {outcome.reason}"
            after = state.coherence.with_change(outcome.alpha_before, outcome.beta_before,
                                                outcome.alpha_after, outcome.beta_after)
            dropped = rules.coherence_dropped(state.coherence.c, after.c, tolerance)
            safety.coherence.check(dropped, memory_id=change.memory_id,
                                   action={"actor": "promotion", "C_before": round(state.coherence.c, 4),
                                           "C_after": round(after.c, 4)}, events=events)
            if not dropped.passed:
                raise _Rollback(dropped.reason)
            state.coherence = after
            return "applied", f"reinforced by {outcome.applied:.3f}; center {outcome.center_after:.3f}"
    except _Rollback as exc:
        log.info("promotion of memory %d rolled back: %s", change.memory_id, exc)
        return "rolled_back", f"rolled back: {exc}"


async def apply_approved(ctx: approval_kinds.ApprovalContext, payload: Mapping[str, Any]) -> approval_kinds.Applied:
    """The operator approved a waiting promotion: run it now, every other check still on."""
    memory_id, tier = int(payload["memory_id"]), str(payload["tier"])
    row = await ctx.pool.fetchrow(
        "SELECT depth_weight_alpha AS a, depth_weight_beta AS b, utility_score FROM memories WHERE id = $1",
        memory_id)
    if row is None:
        return approval_kinds.Applied(False, f"memory {memory_id} no longer exists")
    cfg = ctx.settings.promotion
    goal_n, identity_n = await repo.tier_occupancy(ctx.pool, cfg.goal_center, cfg.identity_center)
    state = PromotionState({"goal": goal_n, "identity": identity_n},
                           await load_coherence(ctx.pool, ctx.now, cfg))
    step = Step(memory_id, tier, float(payload["amount"]), row["a"], row["b"], row["utility_score"],
                {"approved": payload.get("approval_id")})
    status = await promote(ctx.pool, ctx.safety, ctx.settings, ctx.now, step, state, approved=True,
                           approval_id=payload.get("approval_id"))
    after = await ctx.pool.fetchrow(
        "SELECT depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) AS c FROM memories WHERE id = $1",
        memory_id)
    return approval_kinds.Applied(status == "applied",
                             f"{tier} promotion of memory {memory_id}: {status}, center now {after['c']:.3f}")


async def _rejected(conn: asyncpg.Connection, approval_id: int, payload: Mapping[str, Any], now: datetime) -> None:
    await repo.record_promotion(conn, int(payload["memory_id"]), str(payload["tier"]), "rejected", now,
                                f"rejected by the operator (approval #{approval_id})", remaining=0.0)


approval_kinds.register("promotion", apply_approved)
approval_kinds.on_reject("promotion", _rejected)


async def run(ctx: DeepPassContext) -> PhaseResult:
    """Deep-pass phase: promotion (§4.3)."""
    result = PhaseResult()
    await run_promotion(ctx.pool, ctx.safety, evolution_of(ctx), ctx.now, result.counts, ctx.baseline_centers)
    return result
