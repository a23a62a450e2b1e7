"""The gut's part of the deep pass (plan §5.1): rebuild L2, evolve the layer weights
(src/gut/layers.py), find and name the gut axes.

`gut_deep_pass` is the hook consolidation calls after each deep pass; it is also safe to
call on its own (e.g. at start-up). PCA runs off the event loop (`asyncio.to_thread`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from src.gut import repository as repo
from src.gut.gut import Gut, NamedAxis
from src.gut.layers import evolve, layer_evidence
from src.gut.pca import gut_axes
from src.text import excerpt

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeepPassReport:
    l2_rows: int
    deltas: int
    axes: int
    named: int


def _excerpt(text: str | None, limit: int = 48) -> str:
    return excerpt(text or "", limit)


async def evolve_layer_weights(pool, gut: Gut, deltas: np.ndarray, valences: list[float | None], *,
                               now: datetime) -> tuple[float, float, float]:
    """One bounded step of the layer weights from the deltas' outcomes; logged and written
    when they move. Returns the weights in use afterwards."""
    cfg = gut.settings
    evidence = layer_evidence(deltas, valences, gut.layers(), cfg.layer_evolution)
    before = gut.layer_weights
    start = (cfg.layer_weights.l0, cfg.layer_weights.l1, cfg.layer_weights.l2)
    after = evolve(before, start, evidence, cfg.layer_evolution)
    if max(abs(a - b) for a, b in zip(after, before, strict=True)) < 1e-9:
        return before
    await repo.record_layer_weights(pool, now, before, after, {
        "deltas": len(valences), "layers": {e.layer: {"r": e.r, "n": e.n, "z": e.z, "significant": e.significant}
                                            for e in evidence}})
    gut.set_layer_weights(after)
    log.info("gut layer weights evolved %s -> %s (%s)", _fmt(before), _fmt(after),
             ", ".join(f"{e.layer} r={e.r:+.2f}" for e in evidence if e.significant))
    return after


def _fmt(weights) -> str:
    return "/".join(f"{w:.3f}" for w in weights)


async def gut_deep_pass(pool, gut: Gut, embed_model: str, *, now: datetime) -> DeepPassReport:
    """Recompute the subconscious centroid's L2; PCA over logged deltas; store the axes."""
    cfg = gut.settings
    rows = await gut.recompute_l2(pool, embed_model)
    ids, deltas, valences = await repo.deltas_for_pca(pool, cfg.pca_max_samples)
    if cfg.layer_evolution.enabled:
        await evolve_layer_weights(pool, gut, deltas, valences, now=now)
    if len(ids) < cfg.pca_min_samples:
        log.info("gut deep pass: %d deltas logged, PCA needs %d; axes unchanged", len(ids), cfg.pca_min_samples)
        return DeepPassReport(rows, len(ids), 0, 0)
    axes = await asyncio.to_thread(gut_axes, deltas, valences, cfg.pca_axes,
                                   min_outcomes=cfg.name_min_outcomes, min_correlation=cfg.name_min_correlation,
                                   min_z=cfg.name_min_z)
    for axis in axes:
        if axis.meaningful:
            hope = await repo.nearest_memory(pool, axis.component, embed_model)
            fear = await repo.nearest_memory(pool, -axis.component, embed_model)
            axis.name = f"hope: '{_excerpt(hope)}' / fear: '{_excerpt(fear)}'"
    await repo.store_axes(pool, now, axes, len(ids))
    gut.axes = [NamedAxis(a.rank, np.asarray(a.component), a.name, a.correlation) for a in axes]
    named = sum(a.name is not None for a in axes)
    log.info("gut deep pass: L2 over %d memories, %d axes from %d deltas, %d named", rows, len(axes),
             len(ids), named)
    return DeepPassReport(rows, len(ids), len(axes), named)
