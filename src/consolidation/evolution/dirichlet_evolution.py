"""Dirichlet alpha evolution and weight observation (plan §4.5, §3.1 meta-learning).

Recall records, for every memory it returns, each relevance component's
contribution to that memory's score (blend weight x component value,
`recall_outcomes`). Once a recall's outcome window has passed, consolidation
scores it: *used* when the answer of that cycle drew on it or the user confirmed or
corrected it inside the window (src/recall/outcomes.py; re-access is not use). The component that contributed most to a recalled memory is the one
that "put it there".

Evolution: with `share_used[c]` the fraction of used recalls whose top component
was c, and `share_all[c]` that fraction over all scored recalls, each component's
factor moves by exp(eta * (share_used[c] - share_all[c])), clipped to
[`factor_min`, `factor_max`]. A component over-represented among the recalls that
were used (it predicted use) gains weight; one whose recalls went unused loses it;
when use is independent of the component nothing moves. Recall samples the blend
from Dirichlet(blend_alpha(maturity)[c] * factor[c]): the factors lie on top of the
maturity schedule, which stays the baseline. At least `min_outcomes` scored recalls
are needed for a step; every step is written to `dirichlet_history` with its
evidence, so the weights' history stays queryable.

Weight observation: Beta parameters beyond `pathological_evidence` (alpha or beta
exploding) are logged and written to `safety_events` as `beta_pathology` (Phase C,
observation only: nothing here changes a weight).

The factors and the recall outcomes are recall's state (src/recall/dirichlet.py,
src/recall/outcomes.py): this step reads and writes them through recall's functions.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from datetime import datetime

import asyncpg

from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.consolidation.evolution import memories_repository as repo
from src.consolidation.evolution import utility
from src.consolidation.evolution.settings import DirichletSettings, EvolutionSettings, evolution_of
from src.recall import dirichlet, outcomes
from src.recall.relevance import COMPONENTS
from src.weights.safety import SafetyEvent, insert_safety_events

log = logging.getLogger(__name__)


def top_component(contributions: Sequence[float]) -> int:
    """Index (COMPONENTS order) of the component that contributed most; ties -> the first."""
    if len(contributions) != len(COMPONENTS):
        raise ValueError(f"expected {len(COMPONENTS)} contributions, got {len(contributions)}")
    return max(range(len(contributions)), key=lambda i: (contributions[i], -i))


def evolve_factors(factors: Mapping[str, float], used_tops: Sequence[int], all_tops: Sequence[int],
                   cfg: DirichletSettings) -> dict[str, float]:
    """One evolution step (see the module docstring); pure."""
    if not all_tops:
        return {c: float(factors.get(c, 1.0)) for c in COMPONENTS}
    out = {}
    for i, c in enumerate(COMPONENTS):
        share_all = sum(t == i for t in all_tops) / len(all_tops)
        share_used = sum(t == i for t in used_tops) / len(used_tops) if used_tops else share_all
        moved = float(factors.get(c, 1.0)) * math.exp(cfg.learning_rate * (share_used - share_all))
        out[c] = min(cfg.factor_max, max(cfg.factor_min, moved))
    return out


async def run_outcomes(pool: asyncpg.Pool, settings: EvolutionSettings, now: datetime,
                       counts: dict[str, int]) -> dict[str, float] | None:
    """Score due recall outcomes, update utility and evolve the alphas, in one transaction.

    Returns the new factors when they moved, else None.
    """
    cfg = settings.dirichlet
    new_factors = None
    async with pool.acquire() as conn, conn.transaction():
        scored = await outcomes.score_outcomes(conn, now, cfg.outcome_window_days, cfg.max_outcomes)
        counts["outcomes_scored"] = counts.get("outcomes_scored", 0) + len(scored)
        counts["utility_updated"] = counts.get("utility_updated", 0) + await utility.apply_outcomes(
            conn, scored, settings.utility)
        if len(scored) >= cfg.min_outcomes:
            all_tops = [top_component(r["contributions"]) for r in scored]
            used_tops = [t for t, r in zip(all_tops, scored, strict=True) if r["used"]]
            before = {c: float((await dirichlet.read_factors(conn)).get(c, 1.0)) for c in COMPONENTS}
            after = evolve_factors(before, used_tops, all_tops, cfg)
            if any(abs(after[c] - before[c]) > 1e-9 for c in COMPONENTS):
                evidence = {"scored": len(scored), "used": len(used_tops),
                            "top_all": {c: all_tops.count(i) for i, c in enumerate(COMPONENTS)},
                            "top_used": {c: used_tops.count(i) for i, c in enumerate(COMPONENTS)},
                            "window_days": cfg.outcome_window_days}
                await dirichlet.write_factors(conn, now, before, after, evidence)
                counts["dirichlet_steps"] = counts.get("dirichlet_steps", 0) + 1
                new_factors = after
        elif scored:
            log.info("Dirichlet evolution waits: %d scored recall(s), %d needed", len(scored), cfg.min_outcomes)
        await outcomes.prune_outcomes(conn, now, cfg.keep_scored_days)
    return new_factors


async def observe_weights(pool: asyncpg.Pool, settings: EvolutionSettings, counts: dict[str, int]) -> int:
    """Detect and log pathological Beta parameters; returns how many memories have them."""
    limit = settings.dirichlet.pathological_evidence
    total, worst = await repo.pathological_weights(pool, limit)
    counts["pathological_weights"] = total
    if total:
        log.warning("%d memories have a pathological Beta weight (alpha or beta > %g); worst: %s", total, limit,
                    ", ".join(f"#{r['id']} Beta({r['alpha']:.1f}, {r['beta']:.1f})" for r in worst[:5]))
        await insert_safety_events(pool, [
            SafetyEvent("beta_pathology", "C", f"alpha or beta above {limit:g}: Beta({r['alpha']:.1f}, "
                        f"{r['beta']:.1f})", False, r["id"], {"alpha": r["alpha"], "beta": r["beta"]})
            for r in worst])
    return total


async def run(ctx: DeepPassContext) -> PhaseResult:
    """Deep-pass phase: recall outcomes -> utility and Dirichlet alphas; weight observation (§4.5)."""
    result = PhaseResult()
    settings = evolution_of(ctx)
    await run_outcomes(ctx.pool, settings, ctx.now, result.counts)
    await observe_weights(ctx.pool, settings, result.counts)
    return result
