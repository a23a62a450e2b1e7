"""The layer files' entries as memories: values and goals the mind's mechanisms can weigh
(issue 40; plan §2.4, §4.2).

The L0 values and L1 goals files (src/recall/layers.py) steer recall's S_i, salience and
the gut as vectors. Tension detection, the goal budget, the coherence monitor and the goal
trigger read memories whose `metadata.kind` is 'value' or 'goal' (src/weights/self_kinds.py),
so each entry is also a memory:

- written the first time it is seen: a semantic memory, source 'bootstrap_seed' (what the
  mind was born with, never evidence for a derived memory: src/consolidation/deep/integrity.py),
  `metadata` {kind, layer, layer_file, layer_weight}, its Beta centered on the entry's weight
  (below the hard ceiling) over `SEED_EVIDENCE` units. Not immutable: living moves it like
  any other memory — promotion, retrieval, decay, tension;
- kept in step when the file changes (checked whenever the layers are re-read, each cycle;
  cheap when nothing changed): an entry removed from the file loses its kind and keeps its
  row (`layer_retired_at`; the plan never deletes by weight), an entry put back regains it,
  and an entry whose weight was edited is moved to the new center through the weight choke
  point (the guardian's own act: the approval line does not cap it; the goal budget may
  refuse it, as it refuses any goal change).

An entry's text is its identity: editing the text retires the old memory and writes a new
one, as the layer's vector cache does (src/recall/layers.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from src.errors import ProviderError
from src.recall.layers import LAYER_TITLES, LayerVector
from src.recall.store import MemoryStore, NewMemory
from src.weights.apply import WeightChange, apply_weight_changes
from src.weights.safety import Safety
from src.weights.self_kinds import marked
from src.weights.stochastic import amount_to_center, contradiction_to_center

log = logging.getLogger(__name__)

SEED_TAG = "bootstrap_seed"
#: alpha + beta of a new entry's memory: the weight the guardian wrote, held with the
#: confidence of ten observations (a blank-slate memory has five).
SEED_EVIDENCE = 10.0
#: The lowest center an entry is seeded at (a weight of 0 would leave alpha at 0).
MIN_CENTER = 0.05
ACTOR = "layer_file"

_EXISTING = """
SELECT id, content, metadata, depth_weight_alpha AS alpha, depth_weight_beta AS beta
  FROM memories WHERE source_tag = $1 AND metadata->>'layer' = $2 ORDER BY id"""
_SET_METADATA = """
UPDATE memories m SET metadata = u.meta
  FROM unnest($1::bigint[], $2::jsonb[]) AS u(id, meta) WHERE m.id = u.id"""


def seed_center(weight: float, ceiling: float) -> float:
    """The center an entry of `weight` is held at: inside (MIN_CENTER, ceiling)."""
    return min(max(weight, MIN_CENTER), ceiling - 1e-6)


@dataclass
class LayerSync:
    """What one layer's sync did, as memory ids."""

    layer: int
    added: list[int] = field(default_factory=list)
    retired: list[int] = field(default_factory=list)
    restored: list[int] = field(default_factory=list)
    reweighted: list[int] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)    # a weight edit a ceiling refused

    @property
    def changed(self) -> bool:
        return bool(self.added or self.retired or self.restored or self.reweighted or self.refused)


def _meta(raw) -> dict:
    return dict(json.loads(raw) if isinstance(raw, str) else raw or {})


def _toward(memory_id: int, alpha: float, beta: float, center: float, reason: str) -> WeightChange | None:
    """The weight change that moves Beta(alpha, beta) to `center` (None: it is there)."""
    up = amount_to_center(alpha, beta, center)
    if up > 1e-9:
        return WeightChange(memory_id, "reinforce", round(up, 9), ACTOR, reason, {"target": center},
                            approval_checked=True)
    down = contradiction_to_center(alpha, beta, center)
    if down > 1e-9:
        return WeightChange(memory_id, "contradict", round(down, 9), ACTOR, reason, {"target": center})
    return None


async def sync_layer(store: MemoryStore, layer: int, entries: Sequence[tuple[str, float]], *,
                     file_name: str, now: datetime, safety: Safety) -> LayerSync:
    """Bring layer `layer`'s memories in step with `entries` [(text, weight)]."""
    kind = LAYER_TITLES[layer]
    ceiling = safety.settings.center_ceiling
    report = LayerSync(layer)
    rows = await store.pool.fetch(_EXISTING, SEED_TAG, str(layer))
    by_text = {r["content"]: r for r in rows}
    wanted = dict(entries)
    new = [NewMemory(text, "semantic", source_tag=SEED_TAG,
                     alpha=seed_center(w, ceiling) * SEED_EVIDENCE, beta=(1 - seed_center(w, ceiling)) * SEED_EVIDENCE,
                     event_time=now, metadata=marked({"layer": layer, "layer_file": file_name, "layer_weight": w},
                                                     kind, ACTOR, now))
           for text, w in entries if text not in by_text]
    if new:
        report.added = await store.store_many(new)
    updates: dict[int, dict] = {}
    changes: list[WeightChange] = []
    for text, r in by_text.items():
        meta = _meta(r["metadata"])
        if text not in wanted:
            if meta.get("kind") == kind:
                updates[r["id"]] = {**marked(meta, None, ACTOR, now), "layer_retired_at": now.isoformat()}
                report.retired.append(r["id"])
            continue
        weight = wanted[text]
        if meta.get("kind") != kind:
            meta = marked({k: v for k, v in meta.items() if k != "layer_retired_at"}, kind, ACTOR, now)
            report.restored.append(r["id"])
        if meta.get("layer_weight") != weight:
            meta["layer_weight"] = weight
            change = _toward(r["id"], r["alpha"], r["beta"], seed_center(weight, ceiling),
                             f"{kind} weight edited in {file_name}")
            if change is not None:
                changes.append(change)
        if meta != _meta(r["metadata"]):
            updates[r["id"]] = meta
    async with store.pool.acquire() as conn, conn.transaction():
        if updates:
            await conn.execute(_SET_METADATA, list(updates), [json.dumps(m) for m in updates.values()])
        for outcome in await apply_weight_changes(conn, changes, safety=safety) if changes else []:
            if outcome.blocked_by:
                report.refused.append((outcome.memory_id, f"{outcome.blocked_by}: {outcome.reason}"))
            else:
                report.reweighted.append(outcome.memory_id)
    return report


class LayerMemories:
    """Keeps the layers' memories in step with the files, cheaply: a layer is synced when
    its entries differ from the last synced ones (and once at start, for a file edited
    while the mind was stopped)."""

    def __init__(self, store: MemoryStore, safety: Safety, file_names: Mapping[int, str]):
        self.store, self.safety, self.file_names = store, safety, dict(file_names)
        self._synced: dict[int, tuple[tuple[str, float], ...]] = {}

    async def sync(self, layers: Mapping[int, Sequence[LayerVector]], now: datetime) -> list[LayerSync]:
        done: list[LayerSync] = []
        for layer, rows in layers.items():
            entries = tuple((text, float(weight)) for text, weight, _ in rows)
            if self._synced.get(layer) == entries:
                continue
            try:
                report = await sync_layer(self.store, layer, entries, file_name=self.file_names.get(layer, ""),
                                          now=now, safety=self.safety)
            except ProviderError as exc:       # the embedder is down: the next re-read tries again
                log.warning("layer %d: its entries could not be written as memories yet: %s", layer, exc)
                continue
            self._synced[layer] = entries
            if report.changed:
                log.info("layer %d (%ss) as memories: %d added, %d retired, %d restored, %d reweighted%s",
                         layer, LAYER_TITLES[layer], len(report.added), len(report.retired),
                         len(report.restored), len(report.reweighted),
                         f", {len(report.refused)} weight edits refused" if report.refused else "")
            done.append(report)
        return done


__all__ = ["SEED_EVIDENCE", "LayerMemories", "LayerSync", "seed_center", "sync_layer"]
