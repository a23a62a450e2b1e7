"""What is current: the newer of two statements about the same subject ranks first (issue 37 item 3).

Two rules, both on the weighted score before the top is cut (so the rerank's input order and a
rerank-less result hold them), neither removing anything:

1. **Linked updates.** A memory another one superseded by an update (`memory_supersedes` via
   'update', sql/153; written by the exit gate, src/gates/updates.py) comes with its
   successor: the search reads `SearchHit.superseded_by` for every hit, the retriever fetches a
   successor the search missed (`successors_missing`), and the successor ranks at least just
   above it. A question that looks back ("Where did my sister live before?",
   src/recall/timeframe.py `asks_before`) turns the rule round: the earlier statement ranks
   just above the one that replaced it. The model's context marks the older as earlier
   ("until 28 Nov: …", src/context/assembly.py).
2. **Unlinked restatements.** Two of the user's own statements about the same subject (their
   vectors at least `current_same_subject` close) that answer the question nearly as well
   (the lower weighted at least `current_close` of the higher): the newer ranks first. Most
   changes are told without a cue the gate can read offline (notes.md: the gate links two
   thirds of the labelled updates); what the user said last about a thing is what they expect
   back first. A distinct fact about the same subject ("my sister is a pilot" after "my sister
   lives in Porto") answers a question about the other one much less well and keeps its place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from src.recall.hit import SearchHit
from src.recall.scoring import Recalled, user_stated
from src.recall.when import memory_time

#: How much higher than the one it must pass a moved score is set: just above, so nothing
#: else in between changes place.
_ABOVE = 1.0 + 1e-6


def successors_missing(hits: Sequence[SearchHit]) -> list[int]:
    """The successors of superseded hits that are not among `hits` (to fetch and join)."""
    have = {h.id for h in hits}
    out: list[int] = []
    for h in hits:
        if h.superseded_by is not None and h.superseded_by not in have and h.superseded_by not in out:
            out.append(h.superseded_by)
    return out


def current_first(scored: list[Recalled], *, looking_back: bool, same_subject: float,
                  close: float) -> list[Recalled]:
    """`scored` with the weighted scores of the two rules applied (order not changed)."""
    if len(scored) < 2:
        return scored
    out = list(scored)
    at = {r.id: k for k, r in enumerate(out)}
    for k, r in enumerate(out):
        succ = r.hit.superseded_by
        if succ is None or succ not in at:
            continue
        j = at[succ]
        first, second = (k, j) if looking_back else (j, k)   # which must rank above which
        if out[first].weighted <= out[second].weighted:
            out[first] = replace(out[first], weighted=out[second].weighted * _ABOVE + 1e-12)
    if not looking_back:
        out = _restatements(out, same_subject, close)
    return out


def _restatements(out: list[Recalled], same_subject: float, close: float) -> list[Recalled]:
    """Rule 2 over the user's own statements among the candidates."""
    mine = [k for k, is_user in enumerate(user_stated([r.hit for r in out])) if is_user
            and out[k].hit.embedding is not None]
    if len(mine) < 2:
        return out
    vecs = np.stack([out[k].hit.embedding for k in mine]).astype(np.float32)
    vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    near = vecs @ vecs.T
    # the oldest first: a chain of three restatements ends with the newest on top
    order = sorted(range(len(mine)), key=lambda a: _time(out[mine[a]]))
    for ai, a in enumerate(order):
        for b in order[ai + 1:]:
            older, newer = mine[a], mine[b]
            if near[a, b] < same_subject or _time(out[newer]) <= _time(out[older]):
                continue
            high, low = max(out[older].weighted, out[newer].weighted), min(out[older].weighted, out[newer].weighted)
            if high <= 0 or low < close * high or out[newer].weighted > out[older].weighted:
                continue
            out[newer] = replace(out[newer], weighted=out[older].weighted * _ABOVE + 1e-12)
    return out


def _time(r: Recalled) -> float:
    at = memory_time(r.hit.event_time, r.hit.created_at)
    return at.timestamp() if at is not None else 0.0


def newer_first(ranked: list[Recalled], *, looking_back: bool) -> list[Recalled]:
    """Rule 1 once more on a final order (after a rerank): a linked pair both kept stays in order."""
    out = list(ranked)
    for _ in range(len(out)):
        moved = False
        pos = {r.id: k for k, r in enumerate(out)}
        for k, r in enumerate(out):
            succ = r.hit.superseded_by
            if succ is None or succ not in pos:
                continue
            j = pos[succ]
            if (not looking_back and j > k) or (looking_back and k > j):
                src, dst = (j, k) if not looking_back else (k, j)
                out.insert(dst, out.pop(src))
                moved = True
                break
        if not moved:
            break
    return out
