"""Where a promotion leads and how far one pass takes it (plan §4.3, §3.9): pure arithmetic.

§4.3 names the ranges — goal-equivalent ~0.6–0.7, identity-equivalent ~0.8+ — and the
amounts, reinforce(2.0) and reinforce(5.0). Through diminishing returns (gain / log2(n+1),
§3.9) those amounts leave a Beta(1, 4) memory near 0.3 and 0.4, nowhere near the ranges.
So a promotion is a *target center*: the tier's (`goal_target` 0.65, `identity_target`
0.82: inside the ranges, the identity one below the 0.85 that asks for approval), or the
center the plan's amount alone would give, if that is higher. Each pass asks the weight
choke point for the reinforcement that takes the center to the target — or, with the rate
limit enforced, as far as `max_center_change_per_cycle` from where the pass began allows —
and the choke point applies it through every guard (diminishing returns included: the
amount asked is computed through the same formula, so the audit shows both).

A memory starting at center c reaches target t in `passes_to_reach(c, t, limit)` passes:
from Beta(1, 4) (0.2) the goal target in 5, the identity target in 7 (notes.md).
"""

from __future__ import annotations

import math

from src.consolidation.evolution.settings import PromotionSettings
from src.weights.stochastic import amount_to_center, center_after, diminished_gain

#: A step aims this far inside the rate limit, so float rounding never crosses it.
LIMIT_MARGIN = 0.999
#: And this far below the hard ceiling.
CEILING_MARGIN = 1e-6


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


def tier_target(tier: str, alpha: float, beta: float, cfg: PromotionSettings) -> float:
    """The center a promotion granted now leads to: the tier's target, or where the plan's
    amount alone takes the memory when that is higher (a memory already in the range)."""
    if tier == "identity":
        return max(cfg.identity_target, predicted_center(alpha, beta, cfg.identity_amount))
    return max(cfg.goal_target, predicted_center(alpha, beta, cfg.goal_amount))


def step_aim(target: float, baseline: float, *, max_change: float, ceiling: float, rate_limited: bool) -> float:
    """This pass's aim: the target, below the hard ceiling, and (rate limit enforced) no
    more than `max_change` above `baseline`, the center when the pass began."""
    aim = min(target, ceiling - CEILING_MARGIN)
    if rate_limited:
        aim = min(aim, baseline + max_change * LIMIT_MARGIN)
    return aim


def passes_to_reach(start: float, target: float, max_change: float) -> int:
    """How many passes a climb from `start` to `target` takes when the rate limit binds."""
    if start >= target:
        return 0
    return math.ceil((target - start) / (max_change * LIMIT_MARGIN) - 1e-9)


__all__ = ["amount_to_center", "eligible_tier", "passes_to_reach", "predicted_center", "step_aim", "tier_target"]
