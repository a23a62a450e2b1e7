"""A memory as search finds it: the shared type of src/recall/search.py (which reads it)
and src/recall/rerank.py, retrieval and context assembly (which rank and show it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np


@dataclass(frozen=True)
class SearchHit:
    """One memory found by hybrid search, with what later stages need (no second query)."""

    id: int
    content: str
    compressed: str | None
    memory_type: str
    alpha: float
    beta: float
    immutable: bool
    source_tag: str
    source_confidence: float
    access_count: int
    last_accessed: datetime | None
    access_timestamps: list[datetime]
    event_time: datetime | None
    created_at: datetime
    metadata: dict[str, Any]
    embedding: np.ndarray | None      # float32[768]; None when the row has no vector yet
    embed_model: str | None
    similarity: float | None          # cosine to the query; None for another model / no query vector
    vec_rank: int | None              # 1-based rank in the vector arm, None if absent from it
    fts_rank: int | None
    fts_score: float | None           # full-text arm: sum of the idf of the lexemes it contains
    rrf: float
    recency: float
    score: float                      # rrf / rrf_max + w_recency * recency
    own_rank: int | None = None       # rank among the user's own statements (a question about the user)
    # the newest memory that superseded this one by an update, and when it was said (sql/153,
    # src/recall/current.py): None while this memory is current
    superseded_by: int | None = None
    superseded_at: datetime | None = None

