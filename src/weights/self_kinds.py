"""What a memory is to the mind's self: a value or a goal (issue 40; plan §2.4, §3.9, §4.2, §4.3).

The mechanisms that weigh the self read `metadata.kind`: tension detection (a value or a
goal above 0.7, src/consolidation/deep/tension.py), the goal budget (no goal above 40% of
the goals' summed centers, src/weights/apply.py), the coherence monitor's value and action
parts (src/consolidation/monitors.py), the goal trigger (src/loop/triggers.py), the DMN's
"about the self" channel (src/dmn/sampling.py). Three things give a memory its kind, all of
them in a running mind:

- the layer files: each L0 value and L1 goal is also a memory (src/recall/layer_memories.py);
- promotion: a memory promoted into the goal range becomes a goal, into the identity range
  a value (src/consolidation/evolution/promotion.py);
- the guardian: `/value ID`, `/goal ID`, `/kind ID none` at the prompt, `python -m
  src.memory kind` in a shell.

Marking sets the kind and, when the memory's center is below the kind's (the promotion
tiers' targets: a goal 0.65, a value 0.82), asks the weight choke point to lift it there
— so a new goal meets the goal budget like any other goal change, and the guardian is
told when the budget refuses. The lift is the guardian's own act, so the approval line
does not cap it (`approval_checked`); a value's center stays below that line anyway.
Unmarking removes the kind and leaves the weight: what the mind learned stays learned.

A kind the memory had before (an insight, a narrative) is kept in `metadata.kind_was`
and restored when the mark is removed. Tensions and immutable memories (the safety
boundaries) are never marked: a tension is about a value, not one, and a boundary's
weight and kind never change.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from src.text import excerpt
from src.weights.apply import WeightChange, WeightOutcome, apply_weight_changes
from src.weights.safety import Safety
from src.weights.stochastic import amount_to_center

#: The kinds of the self, as `metadata.kind` holds them.
SELF_KINDS = ("value", "goal")
#: Memory types never marked (see the module docstring).
UNMARKABLE_TYPES = frozenset({"tension"})

_LOCK = """SELECT id, memory_type, immutable, metadata, depth_weight_alpha AS alpha,
                  depth_weight_beta AS beta FROM memories WHERE id = $1 FOR UPDATE"""
_SET = "UPDATE memories SET metadata = $2::jsonb WHERE id = $1"


@dataclass(frozen=True)
class KindChange:
    """What marking one memory did."""

    memory_id: int
    found: bool
    kind_before: str | None = None
    kind_after: str | None = None
    refused: str = ""                       # why the memory cannot be marked
    lift: WeightOutcome | None = None       # the weight change toward the kind's center, if asked

    @property
    def changed(self) -> bool:
        return self.found and not self.refused and self.kind_before != self.kind_after


def _metadata(raw) -> dict:
    if isinstance(raw, str):
        raw = json.loads(raw)
    return dict(raw or {})


def marked(meta: dict, kind: str | None, by: str, now: datetime) -> dict:
    """`meta` with `kind` set (None: the self's kind removed, an earlier kind restored)."""
    meta = dict(meta)
    before = meta.get("kind")
    if kind is None:
        if before in SELF_KINDS:
            meta.pop("kind", None)
            if "kind_was" in meta:
                meta["kind"] = meta.pop("kind_was")
        for key in ("kind_by", "kind_at"):
            meta.pop(key, None)
        return meta
    if before is not None and before not in SELF_KINDS and "kind_was" not in meta:
        meta["kind_was"] = before
    meta.update(kind=kind, kind_by=by, kind_at=now.isoformat())
    return meta


async def set_self_kind(conn: asyncpg.Connection, memory_id: int, kind: str | None, *, by: str,
                        now: datetime, safety: Safety, center: float | None = None) -> KindChange:
    """Mark memory `memory_id` a value or a goal (None: neither), in one transaction; with
    `center`, lift its center there through the weight choke point (never lowered)."""
    if kind is not None and kind not in SELF_KINDS:
        raise ValueError(f"kind must be one of {SELF_KINDS} or None, got {kind!r}")
    async with conn.transaction():
        row = await conn.fetchrow(_LOCK, memory_id)
        if row is None:
            return KindChange(memory_id, False)
        meta = _metadata(row["metadata"])
        before = meta.get("kind") if meta.get("kind") in SELF_KINDS else None
        if row["immutable"]:
            return KindChange(memory_id, True, before, before, "an immutable memory keeps its kind and weight")
        if _from_layer(meta):
            return KindChange(memory_id, True, before, before,
                              f"its kind comes from the {meta.get('layer_file') or 'layer'} file; edit the file")
        if row["memory_type"] in UNMARKABLE_TYPES:
            return KindChange(memory_id, True, before, before,
                              f"a {row['memory_type']} memory is about the self's values, not one of them")
        if before != kind or (kind is not None and meta.get("kind_by") != by):
            await conn.execute(_SET, memory_id, json.dumps(marked(meta, kind, by, now)))
        lift = None
        if kind is not None and center is not None:
            amount = amount_to_center(row["alpha"], row["beta"], center)
            if amount > 0:
                change = WeightChange(memory_id, "reinforce", round(amount, 9), by, f"marked a {kind}",
                                      {"kind": kind, "target": center, "at": now.isoformat()},
                                      approval_checked=True)
                lift = (await apply_weight_changes(conn, [change], safety=safety))[0]
        return KindChange(memory_id, True, before, kind, lift=lift)


def describe(change: KindChange) -> str:
    """One line for the guardian: what the mark did, and what the goal budget said."""
    mid = change.memory_id
    if not change.found:
        return f"no memory #{mid}"
    if change.refused:
        return f"memory #{mid} was not marked: {change.refused}"
    what = change.kind_after or "neither a value nor a goal"
    head = (f"memory #{mid} is now {'a ' + what if change.kind_after else what}"
            if change.changed else f"memory #{mid} was already {'a ' + what if change.kind_after else what}")
    lift = change.lift
    if lift is None:
        return head
    before = lift.alpha_before / (lift.alpha_before + lift.beta_before)
    if lift.blocked_by:
        return f"{head}; its weight stays at center {before:.2f} ({lift.blocked_by}: {lift.reason})"
    return f"{head}; center {before:.2f} -> {lift.center_after:.2f}"


_LISTING = """
SELECT id, metadata->>'kind' AS kind, COALESCE(metadata->>'kind_by', '') AS kind_by, content,
       depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) AS center
  FROM memories WHERE metadata->>'kind' IN ('value', 'goal')
 ORDER BY metadata->>'kind' DESC, center DESC, id LIMIT $1"""
#: Where a kind came from, in the listing's words.
_BY = {"layer_file": "layer file", "promotion": "promotion", "guardian": "you"}


async def listing(db, limit: int = 50) -> str:
    """The values and goals, highest center first, each with where its kind came from."""
    rows = await db.fetch(_LISTING, limit)
    if not rows:
        return ("no values or goals yet: the layer files (recall.layers) are empty, nothing was promoted "
                "into the goal or identity range, and none was marked (/value ID, /goal ID)")
    lines = [f"#{r['id']:<6} {r['kind']:<5} center {r['center']:.2f}  ({_BY.get(r['kind_by'], r['kind_by'] or '?')})  "
             f"{excerpt(r['content'], 90)}" for r in rows]
    return "\n".join(lines)


#: The kind a promotion tier gives (plan §4.3: goal-equivalent, identity-equivalent).
TIER_KINDS = {"goal": "goal", "identity": "value"}


async def tag_promoted(conn: asyncpg.Connection, memory_id: int, tier: str, now: datetime) -> dict | None:
    """Give a memory promoted into `tier` the tier's kind, in the caller's transaction;
    returns its metadata before (for `untag`), None when nothing changed. A value is not
    made a goal again, and tensions, immutable memories and the layers' own entries keep
    what they are."""
    kind = TIER_KINDS[tier]
    row = await conn.fetchrow(_LOCK, memory_id)
    if row is None or row["immutable"] or row["memory_type"] in UNMARKABLE_TYPES:
        return None
    meta = _metadata(row["metadata"])
    if meta.get("kind") == kind or meta.get("kind") == "value" or _from_layer(meta):
        return None
    await conn.execute(_SET, memory_id, json.dumps(marked(meta, kind, "promotion", now)))
    return meta


async def untag(conn: asyncpg.Connection, memory_id: int, before: dict) -> None:
    """Put back the metadata `tag_promoted` replaced (the promotion step was refused)."""
    await conn.execute(_SET, memory_id, json.dumps(before))


def _from_layer(meta: dict) -> bool:
    """A layer file's entry still in its file (src/recall/layer_memories.py): its kind is the file's."""
    return "layer" in meta and "layer_retired_at" not in meta


__all__ = ["SELF_KINDS", "TIER_KINDS", "KindChange", "describe", "listing", "marked", "set_self_kind", "tag_promoted", "untag"]
