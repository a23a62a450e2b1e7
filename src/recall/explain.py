"""Every number recall computed for a memory, as JSON (plan §2.5–§3.1 made visible).

The operator CLI's `search --json` (src/memory/search.py), the HTTP API's search
(src/api/routes.py) and the web view's memory pages (src/web/memory_pages.py) show the same components: search arms, ACT-R terms, the
relevance blend, co-activation, rerank. Pure: a Retrieval in, plain dicts out.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from src.recall import relevance as rel
from src.recall.retrieval import Recalled, Retrieval
from src.recall.when import memory_time, said_when
from src.recall.working import NOT_CONSOLIDATED, WorkingHit


def _num(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


def result_json(r: Recalled) -> dict[str, Any]:
    """Every number the pipeline computed for one memory."""
    h, a = r.hit, r.activation
    return {
        "id": h.id, "final": _num(r.final), "memory_type": h.memory_type, "source_tag": h.source_tag,
        "center": _num(h.alpha / (h.alpha + h.beta)), "alpha": h.alpha, "beta": h.beta,
        "search": {"score": _num(h.score), "rrf": _num(h.rrf, 6), "vector_rank": h.vec_rank,
                   "cosine": _num(h.similarity), "fulltext_rank": h.fts_rank,
                   "fulltext_score": _num(h.fts_score, 6), "own_rank": h.own_rank, "recency": _num(h.recency)},
        "act_r": {"B": _num(a.B), "S": _num(a.S), "P": _num(a.P), "noise": _num(a.noise),
                  "A": _num(a.total), "p_retrieve": _num(r.p_retrieve)},
        "relevance": {"components": {c: _num(v) for c, v in zip(rel.COMPONENTS, r.components, strict=True)},
                      "value": _num(r.relevance)},
        "coactivation": _num(r.spread), "weighted": _num(r.weighted), "rerank": _num(r.rerank),
        "content": h.content, "metadata": h.metadata,
        "event_time": h.event_time.isoformat() if h.event_time else None,
        "created_at": h.created_at.isoformat() if h.created_at else None,
    }


def working_json(w: WorkingHit) -> dict[str, Any]:
    """A working-memory hit (src/recall/working.py): a scratch row, not a memory."""
    return {"scratch_id": w.scratch_id, "consolidated": False, "note": NOT_CONSOLIDATED,
            "source_tag": w.source_tag, "created_at": w.created_at.isoformat(),
            "fulltext_score": _num(w.fts_score, 6),
            "cosine": None if w.cosine is None else _num(w.cosine, 4), "content": w.content}


def retrieval_json(result: Retrieval) -> dict[str, Any]:
    return {"query": result.query, "blend": {k: _num(v) for k, v in result.blend.items()},
            "reranked": result.reranked, "rerank_skipped_reason": result.rerank_skipped_reason,
            "degraded": result.degraded, "results": [result_json(r) for r in result.memories],
            "working": [working_json(w) for w in result.working]}


def dated_json(result: Retrieval, now: datetime) -> dict[str, Any]:
    """`retrieval_json` with each memory's and scratch line's `said`: the words the model
    reads of its date (src/recall/when.py), relative to `now`."""
    out = retrieval_json(result)
    for j, r in zip(out["results"], result.memories, strict=True):
        j["said"] = said_when(memory_time(r.hit.event_time, r.hit.created_at), now)
    for j, w in zip(out["working"], result.working, strict=True):
        j["said"] = said_when(w.created_at, now)
    return out
