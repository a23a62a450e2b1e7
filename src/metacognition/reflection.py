"""The reflection bank (plan §3.7): System 2's corrections, recalled before System 1 answers.

A correction is an ordinary `correction` memory (type prefix "Past error
correction: "), so consolidation, decay and the safety rules treat it like any
other memory. Its content is readable text; its metadata holds the five fields
of §3.7 separately:

    trigger             the situation the error happened in: the attention focus
                        (what should bring the lesson back next time)
    error_type          a short label ("unsupported claim", "missed step", ...)
    original_reasoning  what System 1 said or did
    correction          the general lesson (System 2's correction pattern)
    context             the circumstances: source, escalation triggers, confidence

Recall keys on the *current attention focus* (§3.4: a DMN thought or a gut
signal can be the focus as well as a user message). `corrections_for` is one
statement over the correction rows only (a partial index finds them; their
number grows with escalations, not with the store): an exact vector ranking over
rows of the current embed model, kept only above `min_similarity` so an
unrelated focus brings back nothing; and a full-text arm for the rows vectors
cannot reach (no query vector because the embedder is down, rows of another or
no embed model). Vector matches come first. Recall is read-only: corrections
are not reinforced by being shown (§3.8 mutation is the retriever's business).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import numpy as np
from pgvector import HalfVector

from src.errors import ProviderError
from src.metacognition.prompts import REFLECTION_HEADER, reflection_block
from src.metacognition.settings import ReflectionSettings
from src.providers.protocols import Embedder
from src.recall.search import QUESTION_TSQUERY
from src.recall.store import EMBEDDING_DIMENSIONS, MemoryStore, NewMemory
from src.text import clean_text, excerpt

log = logging.getLogger(__name__)

CORRECTION_TYPE = "correction"
FIELDS = ("trigger", "error_type", "original_reasoning", "correction", "context")
#: Longest a field may be in the stored content and metadata.
FIELD_CHARS = 2000
#: Characters of System 1's original reasoning kept in the content (all of it is in metadata).
REASONING_CHARS = 300



@dataclass(frozen=True)
class NewCorrection:
    """One correction to write to the reflection bank: the five fields of §3.7 (`FIELDS`)."""

    trigger: str
    error_type: str
    original_reasoning: str
    correction: str
    context: str


@dataclass(frozen=True)
class PastCorrection:
    id: int
    trigger: str
    error_type: str
    original_reasoning: str
    correction: str
    context: str
    created_at: datetime
    similarity: float | None      # None when found by full text
    arm: str                      # "vector" | "fulltext"


def _field(value: str, name: str) -> str:
    text = clean_text(value).text.strip()
    if name in ("trigger", "correction") and not text:
        raise ValueError(f"a correction needs a non-empty {name}")
    return text[:FIELD_CHARS]


def correction_text(fields: dict[str, str]) -> str:
    """The readable content of a correction memory.

    This is also what gets embedded, so it holds what recall should match on: the
    situation and the lesson. What System 1 said is cut to `REASONING_CHARS` and
    the context left to the metadata: a long draft or a list of triggers would
    drown the situation in the vector.
    """
    lines = [f"Situation: {fields['trigger']}"]
    if fields["error_type"]:
        lines.append(f"Error: {fields['error_type']}")
    if fields["original_reasoning"]:
        lines.append(f"What I did: {excerpt(fields['original_reasoning'], REASONING_CHARS)}")
    lines.append(f"Correction: {fields['correction']}")
    return "\n".join(lines)


async def store_correction(store: MemoryStore, correction: NewCorrection, *,
                           source_tag: str = "internal_system2", source_confidence: float = 0.8,
                           extra: dict[str, Any] | None = None) -> int:
    """Write one correction memory; return its id."""
    fields = {name: _field(getattr(correction, name), name) for name in FIELDS}
    metadata: dict[str, Any] = {"kind": "correction", **fields, **(extra or {})}
    memory_id = await store.store(NewMemory(correction_text(fields), CORRECTION_TYPE, source_tag=source_tag,
                                            source_confidence=source_confidence, metadata=metadata))
    log.info("reflection bank: stored correction %d (%s)", memory_id, fields["error_type"] or "untyped")
    return memory_id


CORRECTIONS_SQL = r"""
WITH bank AS MATERIALIZED (
    SELECT id, embedding, embed_model, content_tsv
    FROM memories
    WHERE memory_type = 'correction'
),
question AS (
    SELECT """ + QUESTION_TSQUERY + r""" AS tsq
),
vec AS (
    SELECT id, 1 - (embedding <=> $2::halfvec) AS similarity
    FROM bank
    WHERE $2::halfvec IS NOT NULL AND embed_model = $3::text
    ORDER BY embedding <=> $2::halfvec, id
    LIMIT $4::int
),
fts AS (
    SELECT id, ts_rank_cd(content_tsv, (SELECT tsq FROM question)) AS rank
    FROM bank
    WHERE content_tsv @@ (SELECT tsq FROM question)
      AND ($2::halfvec IS NULL OR embed_model IS DISTINCT FROM $3::text)
    ORDER BY rank DESC, id
    LIMIT $4::int
),
picked AS (
    SELECT id, similarity, NULL::real AS rank, 'vector' AS arm FROM vec WHERE similarity >= $5::float8
    UNION ALL
    SELECT id, NULL::float8, rank, 'fulltext' FROM fts
)
SELECT m.id, m.metadata, m.content, m.created_at, p.similarity, p.arm
FROM picked p JOIN memories m USING (id)
ORDER BY p.arm = 'fulltext', p.similarity DESC NULLS LAST, p.rank DESC NULLS LAST, m.id
LIMIT $4::int
"""


def _past(row: asyncpg.Record) -> PastCorrection:
    meta = row["metadata"]
    meta = json.loads(meta) if isinstance(meta, str) else (meta or {})
    return PastCorrection(
        id=row["id"], trigger=str(meta.get("trigger") or ""), error_type=str(meta.get("error_type") or ""),
        original_reasoning=str(meta.get("original_reasoning") or ""),
        # a correction written by hand (no metadata) still shows its text
        correction=str(meta.get("correction") or row["content"]), context=str(meta.get("context") or ""),
        created_at=row["created_at"], similarity=row["similarity"], arm=row["arm"])


async def corrections_for(pool: asyncpg.Pool | asyncpg.Connection, embedder: Embedder, attention_focus: str,
                          *, k: int | None = None, focus_vec: np.ndarray | None = None,
                          settings: ReflectionSettings | None = None) -> list[PastCorrection]:
    """The top-`k` past corrections for the current attention focus, best first
    (`k` defaults to `settings.k`).

    `focus_vec` is the focus embedded with RETRIEVAL_QUERY by `embedder` when the
    caller has it already (retrieval embeds the same text); otherwise it is
    embedded here. Without a vector (embedder down) only full text searches.
    """
    cfg = settings or ReflectionSettings()
    k = cfg.k if k is None else k
    text = clean_text(attention_focus).text.strip()
    if not text:
        return []
    vec = focus_vec
    if vec is None:
        try:
            vec = (await embedder.embed([text], "RETRIEVAL_QUERY"))[0]
        except ProviderError as exc:
            log.warning("reflection bank: focus embedding failed, full-text recall only: %s", exc)
    query = None
    if vec is not None:
        arr = np.asarray(vec, dtype=np.float32)
        if arr.shape != (EMBEDDING_DIMENSIONS,) or not np.all(np.isfinite(arr)) or not arr.any():
            raise ValueError(f"focus vector must be {EMBEDDING_DIMENSIONS} finite floats, not all zero; "
                             f"got shape {arr.shape}")
        query = HalfVector(arr)
    rows = await pool.fetch(CORRECTIONS_SQL, text, query, embedder.model_name, k,
                            cfg.floor(embedder.model_name))
    return [_past(r) for r in rows]


__all__ = ["CORRECTIONS_SQL", "CORRECTION_TYPE", "FIELDS", "REFLECTION_HEADER", "NewCorrection", "PastCorrection",
           "ReflectionSettings", "correction_text", "corrections_for", "reflection_block", "store_correction"]
