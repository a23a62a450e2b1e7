"""Decay (plan §4.4) and demotion (§4.3, §5.3): fading, never deleting.

Decay: a memory not accessed for `idle_days` (90) with fewer than `max_access_count`
(3) accesses gets `contradict(1.0)` once — once per idle stretch: a later access
starts a new one. For a blank-slate Beta(1, 4) that moves the center 0.20 -> 0.17.
Demotion: a promoted memory, or any at or above the goal center, that nothing has
reinforced for `demotion_idle_days` (30) gets `contradict(demotion_amount)` at most
once per `demotion_every_days` (7), until it falls to `demotion_min_center` (the
dormant center): dormant, recoverable by a strong cue (§3.8), never deleted.

A memory a newer statement updated (sql/153) fades (issue 37 item 5): recall keeps
bringing it along with its successor (src/recall/current.py), which keeps an earlier fact
in view, not in use. So both clocks count it idle from the update at the latest, and decay
takes it whatever its access count (memories_repository.py `_LAST_USED`). Nothing else
changes: the amounts are the same, the guardian's /protect still holds (an explicit
choice, src/weights/protection.py), and the newer is measured like any other memory —
the link never speeds its fading.

Demotion passes the Two-Gate guardrail first (§5.3: "Two-Gate guardrail on every
promotion/demotion"), the mirror of promotion's gates:
  1. validation margin = −utility: the memory's outcomes must not speak for it (its
     Q-value, src/consolidation/evolution/utility.py, at most −`two_gate_min_margin`).
     A memory the answers keep drawing on, or the guardian called good, is not demoted
     for being idle.
  2. capacity = the share of its tier's capacity (`goal_capacity`, `identity_capacity`:
     the tier by its center, identity at or above `identity_center`, else goal) this
     pass has demoted, this one included: one pass never drains a tier wholesale.
A refusal is a `two_gate` safety event (with Phase B's mode: in shadow mode it is only
logged and the demotion applies) written with the pass's demotions in one transaction;
a refused memory is not tried again for `demotion_every_days`.

Both are set-based: one candidate query, one call of the weight choke point (one
UPDATE by unnest). They carry no rate-limit baseline: suppression keeps its full
effect (see src/weights/apply.py), and the rate limiter restrains runaway growth.
"""

from __future__ import annotations

import logging
from datetime import datetime

import asyncpg

from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.consolidation.evolution import memories_repository as repo
from src.consolidation.evolution.settings import EvolutionSettings, PromotionSettings, evolution_of
from src.weights import safety_rules as rules
from src.weights.apply import WeightChange, apply_weight_changes
from src.weights.safety import Safety, SafetyEvent, insert_safety_events

log = logging.getLogger(__name__)


async def run_decay(pool: asyncpg.Pool, safety: Safety, settings: EvolutionSettings, now: datetime,
                    counts: dict[str, int]) -> list[int]:
    """§4.4 decay for old, rarely used rows; returns the decayed ids."""
    cfg = settings.decay
    rows = await repo.decay_candidates(pool, now, cfg.idle_days, cfg.max_access_count, cfg.max_per_pass)
    changes = [WeightChange(r["id"], "contradict", cfg.amount, "decay", _decay_reason(r, cfg.idle_days),
                            {"at": now.isoformat(), "last_seen": r["last_seen"].isoformat(),
                             "access_count": r["access_count"],
                             **({"superseded_at": r["superseded_at"].isoformat()} if r["superseded_at"] else {})},
                            forgetting="decay")
               for r in rows]
    outcomes = await apply_weight_changes(pool, changes, safety=safety)
    decayed = [o.memory_id for o in outcomes if o.blocked_by is None]
    counts["decayed"] = counts.get("decayed", 0) + len(decayed)
    if len(rows) == cfg.max_per_pass:
        log.info("decay reached its per-pass bound (%d); the rest follow next pass", cfg.max_per_pass)
    return decayed


def _decay_reason(r, idle_days: float) -> str:
    if r["superseded_at"] is not None:
        return f"updated by a newer statement; idle for {idle_days:g}+ days (recalls since the update do not count)"
    return f"not accessed for {idle_days:g}+ days, {r['access_count']} access(es)"


def demotion_tier(center: float, cfg: PromotionSettings) -> tuple[str, int]:
    """The tier a demoted memory leaves, and that tier's capacity."""
    if center >= cfg.identity_center:
        return "identity", cfg.identity_capacity
    return "goal", cfg.goal_capacity


def gated_demotions(rows, safety: Safety, cfg: PromotionSettings, now: datetime,
                    events: list[SafetyEvent]) -> list[WeightChange]:
    """The demotions the Two-Gate guardrail lets through, in candidate order (least useful
    first); refusals and shadow-mode failures go to `events`."""
    s = safety.settings
    drained: dict[str, int] = {}
    changes = []
    for r in rows:
        center = r["alpha"] / (r["alpha"] + r["beta"])
        tier, capacity = demotion_tier(center, cfg)
        margin, used = -float(r["utility_score"]), (drained.get(tier, 0) + 1) / capacity
        result = rules.two_gate(margin, s.two_gate_min_margin, used, s.two_gate_capacity_cap)
        passed, _ = safety.two_gate.check(result, memory_id=r["id"], events=events, action={
            "actor": "demotion", "operation": "contradict", "amount": cfg.demotion_amount, "at": now.isoformat(),
            "utility": round(float(r["utility_score"]), 6), "tier": tier, "capacity_used": round(used, 6)})
        if not passed:
            continue
        drained[tier] = drained.get(tier, 0) + 1
        changes.append(WeightChange(
            r["id"], "contradict", cfg.demotion_amount, "demotion",
            f"not reinforced for {cfg.demotion_idle_days:g}+ days",
            {"at": now.isoformat(), "last_reinforced": r["last_reinforced"].isoformat(), "tier": tier,
             "two_gate": result.reason}, forgetting="demotion"))
    return changes


async def run_demotion(pool: asyncpg.Pool, safety: Safety, settings: EvolutionSettings, now: datetime,
                       counts: dict[str, int], *, exclude: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """§4.3 demotion pathway: gradual contradict() for memories no longer reinforced, each
    through the Two-Gate guardrail (module docstring)."""
    cfg = settings.promotion
    rows = await repo.demotion_candidates(
        pool, now, min_center=cfg.demotion_min_center, goal_center=cfg.goal_center,
        idle_days=cfg.demotion_idle_days, every_days=cfg.demotion_every_days, limit=cfg.max_demotions_per_pass)
    events: list[SafetyEvent] = []
    changes = gated_demotions([r for r in rows if r["id"] not in exclude], safety, cfg, now, events)
    async with pool.acquire() as conn, conn.transaction():
        outcomes = await apply_weight_changes(conn, changes, safety=safety)
        if events:
            await insert_safety_events(conn, events)
    demoted = [o.memory_id for o in outcomes if o.blocked_by is None]
    refused = sum(e.enforced for e in events)
    counts["demoted"] = counts.get("demoted", 0) + len(demoted)
    if refused:
        counts["demotion_refused"] = counts.get("demotion_refused", 0) + refused
    return demoted


async def run(ctx: DeepPassContext) -> PhaseResult:
    """Deep-pass phase: decay (§4.4), then demotion (§4.3) of what decay did not touch."""
    result = PhaseResult()
    settings = evolution_of(ctx)
    decayed = await run_decay(ctx.pool, ctx.safety, settings, ctx.now, result.counts)
    await run_demotion(ctx.pool, ctx.safety, settings, ctx.now, result.counts, exclude=set(decayed))
    return result
