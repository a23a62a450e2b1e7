"""The exit gate's SQL: the reads it scores with, and the writes of one flush transaction.

Writes happen inside the caller's transaction (src/gates/exit.py `_write`):
`persist` inserts the survivors through the store's COPY path (src/recall/store.py:
ids reserved first, so a flagged memory can name a contradicted one persisted in the
same chunk; the same checks and cleaning as every other memory), `apply_weights`
sends reinforce / contradict through the weight choke point, `record_exit` COPYs
one `gate_decisions` row per item. A new memory starts at the store's Beta(1, 4); weights
change only through the choke point. A memory keeps its scratch row's source tag, and the
speaker its metadata may name: who said it (src/recall/speakers.py, issue 27).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import replace

import asyncpg
import numpy as np

from src.db.sql import Executor
from src.gates.entry import PREVIEW_CHARS
from src.gates.evaluation import Evaluation, Neighbour
from src.gates.matrix import PERSISTING
from src.gates.scratch import TURN_TAGS, turn_contexts
from src.gates.settings import ExitGateSettings
from src.recall.store import (
    EMBEDDING_DIMENSIONS,
    NewMemory,
    copy_memories,
    metadata_json,
    prepare,
    reserve_memory_ids,
)
from src.weights.apply import WeightChange, apply_weight_changes
from src.weights.safety import Safety

log = logging.getLogger(__name__)


_DECISION_COLUMNS = (
    "gate", "scratch_id", "memory_id", "source_tag", "content_preview", "cell_relevance",
    "cell_novelty", "s_i", "relevance", "bootstrap_floor", "activation", "base_level",
    "novelty_similarity", "nearest_memory_id", "contradiction_layer", "opposition",
    "emotional_charge", "cell_action", "action", "random_draw", "noise_rate", "noise_fired",
    "round", "embed_model", "reason", "details",
)


async def recent_vectors(db: Executor, embed_model: str, limit: int) -> np.ndarray:
    """Embeddings of the `limit` newest memories of `embed_model`, as rows."""
    if limit <= 0:
        return np.empty((0, EMBEDDING_DIMENSIONS), dtype=np.float32)
    rows = await db.fetch(
        """SELECT embedding FROM memories WHERE embed_model = $1 AND embedding IS NOT NULL
            ORDER BY created_at DESC LIMIT $2""", embed_model, limit)
    if not rows:
        return np.empty((0, EMBEDDING_DIMENSIONS), dtype=np.float32)
    return np.vstack([r["embedding"].to_numpy() for r in rows]).astype(np.float32)


def _target(n: Neighbour | None, batch_ids: dict[int, int]) -> int | None:
    if n is None:
        return None
    return n.memory_id if n.memory_id is not None else batch_ids.get(n.batch_index)


async def persist(conn: asyncpg.Connection, evaluations: Sequence[Evaluation], embed_model: str,
                  memory_type: str, chunk_index: dict[int, int]) -> dict[int, int]:
    """Insert every evaluation whose action persists and set its `memory_id`.

    `chunk_index` maps scratch id -> index in the evaluated chunk; the answer maps
    chunk index -> new memory id, so targets inside the chunk can be resolved.
    """
    keep = [e for e in evaluations if e.cell.action in PERSISTING]
    if not keep:
        return {}
    ids = await reserve_memory_ids(conn, len(keep))
    batch_ids: dict[int, int] = {}
    for e, memory_id in zip(keep, ids, strict=True):
        e.memory_id = memory_id
        batch_ids[chunk_index[e.item.id]] = memory_id
    # a turn of the conversation carries the turns before it, for finding it (issue 35)
    contexts = await turn_contexts(conn, [e.item.id for e in keep if e.item.source_tag in TURN_TAGS])
    prepared = []
    for e in keep:
        meta = {"scratch_id": e.item.id, "tags": list(e.item.tags),
                "emotional_charge": round(e.charge, 6),
                "gate_cell": f"{e.cell.relevance}/{e.cell.novelty}",
                "priority": e.cell.priority}
        if isinstance(e.item.metadata.get("speaker"), str):     # a named speaker (src/recall/speakers.py)
            meta["speaker"] = e.item.metadata["speaker"]
        if e.cell.action == "persist_flag" and e.decided_by is not None:
            neighbour, verdict = e.decided_by
            meta.update(flag="contradiction", contradicts=_target(neighbour, batch_ids),
                        contradiction_layer=verdict.layer)
        # the store's checks and cleaning apply here too (the LLM's `compressed` line included)
        prepared.append(prepare(NewMemory(
            e.item.content, memory_type, e.item.source_tag, float(e.item.source_confidence),
            event_time=e.item.created_at, compressed=e.compressed, metadata=meta,
            context=contexts.get(e.item.id)),
            f"scratch item {e.item.id}"))
    metas = [metadata_json(p.item.metadata, f"scratch item {e.item.id}")
             for p, e in zip(prepared, keep, strict=True)]
    await copy_memories(conn, ids, prepared, [e.vec for e in keep], embed_model, metas)
    return batch_ids


async def apply_weights(conn: asyncpg.Connection, evaluations: Sequence[Evaluation],
                        batch_ids: dict[int, int], settings: ExitGateSettings,
                        safety: Safety) -> None:
    """Reinforce what is confirmed and contradict what a flagged item opposes.

    A reinforce whose target is an item of this chunk that was not persisted has
    nothing to reinforce and becomes a skip.
    """
    changes: list[WeightChange] = []
    owners: list[Evaluation] = []
    for e in evaluations:
        if e.cell.action == "reinforce":
            target = _target(e.nearest, batch_ids)
            if target is None:
                e.cell = replace(e.cell, action="skip",
                                 reason=e.cell.reason + "; the memory it confirms was not "
                                        "persisted -> skip")
                continue
            e.memory_id = target
            changes.append(WeightChange(target, "reinforce", settings.reinforce_amount, "exit_gate",
                                        "confirmed by a new item", _evidence(e)))
            owners.append(e)
        elif e.cell.action == "persist_flag" and e.decided_by is not None:
            target = _target(e.decided_by[0], batch_ids)
            if target is not None:
                changes.append(WeightChange(target, "contradict", settings.contradict_amount,
                                            "exit_gate", "contradicted by a new item", _evidence(e)))
                owners.append(e)
    outcomes = await apply_weight_changes(conn, changes, safety=safety)
    for e, change, outcome in zip(owners, changes, outcomes, strict=True):
        e.outcome = {"memory_id": change.memory_id, "operation": change.operation,
                     "applied": outcome.applied, "blocked_by": outcome.blocked_by}
        if outcome.blocked_by:
            log.info("exit gate %s of memory %d blocked by %s: %s", change.operation,
                     change.memory_id, outcome.blocked_by, outcome.reason)


def _evidence(e: Evaluation) -> dict:
    return {"scratch_id": e.item.id, "similarity": e.nearest.similarity if e.nearest else None,
            "cell": f"{e.cell.relevance}/{e.cell.novelty}"}


def _details(e: Evaluation, flush_reason: str) -> str:
    decided = e.decided_by[1] if e.decided_by else None
    return json.dumps({
        "flush": flush_reason, "priority": e.cell.priority, "novelty_band": e.band,
        "maturity": round(e.maturity, 6), "noise_activation": e.act.noise,
        "nearest_in_chunk": bool(e.nearest and e.nearest.memory_id is None),
        "verdicts": [{"memory_id": n.memory_id, "chunk_index": n.batch_index,
                      "similarity": round(n.similarity, 6), "layer": v.layer,
                      "contradicts": v.contradicts, "opposition": v.opposition}
                     for n, v in e.verdicts],
        "contradicts": decided.contradicts if decided else None,
        "llm_calls": e.llm_calls, "compressed_by": e.compressed_by,
        "weight_change": e.outcome, "tags": list(e.item.tags),
        "utterance": e.utterance.kind if e.utterance is not None else None,
        "update_of": ({"memory_id": e.update_of.memory_id, "chunk_index": e.update_of.batch_index,
                       "similarity": round(e.update_of.similarity, 6), "why": e.update_reason}
                      if e.update_of is not None else None),
        "updated_by": ({"memory_id": e.updated_by.memory_id, "chunk_index": e.updated_by.batch_index}
                       if e.updated_by is not None else None),
    }, ensure_ascii=False, default=str)


async def record_exit(conn: asyncpg.Connection, evaluations: Sequence[Evaluation],
                      batch_ids: dict[int, int], embed_model: str, flush_reason: str) -> None:
    """One `gate_decisions` row per evaluation, with one COPY."""
    records = []
    for e in evaluations:
        decided = e.decided_by[1] if e.decided_by else None
        nearest = e.nearest
        records.append((
            "exit", e.item.id, e.memory_id, e.item.source_tag, e.item.content[:PREVIEW_CHARS],
            e.cell.relevance, e.cell.novelty, e.act.S, e.relevance, e.floor, e.act.total, e.act.B,
            nearest.similarity if nearest else None,
            _target(nearest, batch_ids),
            decided.layer if decided else "none",
            decided.opposition if decided else None,
            e.charge, e.cell.cell_action, e.cell.action, e.cell.draw, e.cell.noise_rate,
            e.cell.noise_fired, e.round, embed_model, e.cell.reason, _details(e, flush_reason),
        ))
    if records:
        await conn.copy_records_to_table("gate_decisions", records=records,
                                         columns=_DECISION_COLUMNS)
