"""Copilot's held items as data: the gate's evaluation to JSON and back, and the listing.

A held item is written whole (src/gates/held_repository.py, table `held_memories`):
the evaluation the guardian is asked about — activation terms, cell, neighbours,
verdicts, compressed line — and its embedding. Keeping it later, in this run or
after a restart, writes exactly that decision: nothing is embedded or judged again.

Neighbours that were items of the same chunk (`batch_index`) mean nothing outside
their flush, so they are resolved to the memory the chunk wrote for them when the
item is held (None when that item wrote nothing). Neighbour texts are not kept:
nothing after the evaluation reads them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any

import numpy as np

from src.gates.contradiction import Verdict
from src.gates.evaluation import Evaluation, Neighbour
from src.gates.matrix import CellDecision
from src.gates.scratch import BufferedItem
from src.recall.activation import ActivationResult
from src.terminal import escape
from src.text import excerpt

#: characters of an item's text in the question and the listings
PREVIEW_CHARS = 100

#: what keeping a held item writes, by its action, when more than storing it
KEEPS = {"persist": "", "persist_flag": " (kept, it is stored flagged as a contradiction)"}

Resolve = Callable[[Neighbour], int | None]


def _neighbour(n: Neighbour | None, resolve: Resolve) -> dict | None:
    return None if n is None else {"similarity": n.similarity, "memory_id": resolve(n)}


def _pair(pair: tuple[Neighbour, Verdict] | None, resolve: Resolve) -> dict | None:
    return None if pair is None else {"neighbour": _neighbour(pair[0], resolve), "verdict": asdict(pair[1])}


def evaluation_json(e: Evaluation, resolve: Resolve) -> str:
    """What `restore` needs to write `e` later; `resolve` maps a neighbour to its memory id."""
    return json.dumps({
        "act": asdict(e.act), "floor": e.floor, "relevance": e.relevance,
        "nearest": _neighbour(e.nearest, resolve), "band": e.band, "charge": e.charge,
        "maturity": e.maturity, "verdicts": [_pair(p, resolve) for p in e.verdicts],
        "decided_by": _pair(e.decided_by, resolve), "novelty": e.novelty, "cell": asdict(e.cell),
        "compressed": e.compressed, "compressed_by": e.compressed_by, "llm_calls": e.llm_calls,
        "update_of": _neighbour(e.update_of, resolve), "update_reason": e.update_reason,
        "updated_by": _neighbour(e.updated_by, resolve),
    }, ensure_ascii=False)


def _restore_neighbour(d: dict | None) -> Neighbour | None:
    return None if d is None else Neighbour(d["similarity"], "", memory_id=d["memory_id"])


def _restore_pair(d: dict | None) -> tuple[Neighbour, Verdict] | None:
    return None if d is None else (_restore_neighbour(d["neighbour"]), Verdict(**d["verdict"]))


def restore(row: Mapping[str, Any]) -> Evaluation:
    """The held evaluation of a `held_memories` row joined with its scratch row.

    `llm_calls` is 0: the calls were made (and recorded) when the item was evaluated.
    """
    d = row["evaluation"]
    d = json.loads(d) if isinstance(d, str) else d
    meta = row["metadata"]
    item = BufferedItem(row["scratch_id"], row["content"], row["source_tag"], row["source_confidence"],
                        tuple(row["tags"]), json.loads(meta) if isinstance(meta, str) else dict(meta),
                        row["created_at"], row["expires_at"])
    vec = row["embedding"]
    vec = np.asarray(vec.to_numpy() if hasattr(vec, "to_numpy") else vec, dtype=np.float32)
    e = Evaluation(item, vec, ActivationResult(**d["act"]), d["floor"], d["relevance"],
                   _restore_neighbour(d["nearest"]), d["band"], d["charge"], d["maturity"],
                   verdicts=[_restore_pair(p) for p in d["verdicts"]],
                   decided_by=_restore_pair(d["decided_by"]), novelty=d["novelty"],
                   cell=CellDecision(**d["cell"]), compressed=d["compressed"],
                   compressed_by=d["compressed_by"],
                   # held before updates were judged: none (src/gates/updates.py)
                   update_of=_restore_neighbour(d.get("update_of")), update_reason=d.get("update_reason", ""),
                   updated_by=_restore_neighbour(d.get("updated_by")))
    return e


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """One line of an item's text for the operator: cut, control characters escaped."""
    return escape(excerpt(text, limit))


def age_text(seconds: float) -> str:
    """'40 s', '12 min', '3 h', '2 days' — how long an item has been held."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


def listing(rows: Sequence[Mapping[str, Any]], now: datetime, *, mode: str | None = None) -> str:
    """The `/held` and `python -m src.memory held` text: every held item, oldest first.

    `mode` (the running mind's memory mode) says when the items are asked about.
    """
    if not rows:
        return "no memories are held for your decision"
    lines = [f"{len(rows)} memor{'y' if len(rows) == 1 else 'ies'} held for your decision:"]
    lines += [f"  scratch #{r['scratch_id']}, held {age_text((now - r['held_at']).total_seconds())} ago "
              f"[{escape(r['why'])}]{KEEPS[r['action']]}: {preview(r['content'])}" for r in rows]
    they, them = ("it is", "it") if len(rows) == 1 else ("they are", "them")
    if mode == "off":
        lines.append(f"memory mode is off: {they} kept, not written, and asked about once the mode "
                     "is copilot or autopilot (/memory-mode)")
    elif mode is not None:
        lines.append(f"I ask about {them} after my next answer (Keep these? y/n/numbers)")
    return "\n".join(lines)
