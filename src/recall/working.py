"""Working memory in recall: what was just said, before the exit gate has judged it
(issue 22; plan §2.9's scratch buffer read by §2.6's recall).

The exit gate runs every few exchanges, so a fact stated one message ago is still a
`scratch_buffer` row when the next message asks about it ("my neighbour's parrot is
called Captain Biscuit" → "what is my neighbour's parrot called?"). Recall therefore
also reads the unflushed scratch rows — every row the gate has not decided for good,
buffered ones included — with the same OR-of-lexemes full-text query as the memory
store's keyword arm, ranked by `ts_rank`. The buffer is small (a few exchanges; at most
what an outage held back), so the text vectors are computed on the fly.

Such hits are not memories: they have no weight, no activation and no id in
`memories`; they are returned beside the memories, marked as not yet consolidated,
and never mutated. Each carries its speaker (`speaker`: the row's source tag, and the
`metadata.speaker` it may name, src/recall/speakers.py), so a line shown to the model
reads "The user said: …" or "I said: …", not bare words it would take as its own
(issue 27). Left out: rows admitted while the memory mode was off (nothing of
those may be kept), the rows of the current input itself (`exclude`), and the user's
lines that are questions or chatter (src/gates/utterance.py): "what do I keep?" must
not come back as the answer to "what do I keep?".

Full text alone misses a fact asked in other words: in the local model's script (bench/
local_model_script.py) the ten facts typed one after another stayed unflushed for minutes,
and "What language am I learning?" could not reach "I'm currently studying Icelandic on
Tuesday evenings." until the flush (the questions before the restart were right 5 of 9
times, after it 8 of 10). So the user's own statements are also compared by vector with
the question: each row is embedded once (`WorkingVectors`, kept by scratch id) and
matches at a cosine of at least `floor` — per embed model, the 95th percentile of a
question's cosine with other facts of the user (bench/data/paraphrase_facts.jsonl, dev
half: an unrelated line of theirs passes one time in twenty). The two lists are fused by
reciprocal rank. Only the user's lines: the mind's replies (a wrong answer among them)
come back by their words alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from src.db.sql import Executor
from src.gates.utterance import classify
from src.providers.protocols import Embedder
from src.recall.search import QUESTION_TSQUERY
from src.recall.speakers import Speaker, speaker_of

#: The mark every surface shows on a working-memory hit.
NOT_CONSOLIDATED = "just said, not yet consolidated"
#: Sources whose lines are classified before they are offered (the user's own words).
CLASSIFIED_SOURCES = frozenset({"external_user"})
#: Rows read per query before the question/chatter filter (the buffer is small).
SCAN_LIMIT = 50
#: Reciprocal-rank constant of the fusion of the full-text and vector lists.
FUSE_K = 10
#: The user's unflushed lines: the rows the vector path compares.
USER_SOURCE = "external_user"

#: Unflushed scratch rows whose vectors are kept (the buffer holds a few exchanges; after an
#: outage, more): past this the oldest go first.
VECTORS_KEPT = 1_000

#: The vectors of (scratch id, text) rows; None where a row has none.
Embed = Callable[[Sequence[tuple[int, str]]], Awaitable[list[np.ndarray | None]]]


class WorkingVectors:
    """The vectors of unflushed scratch rows, each embedded once as memories are embedded
    (RETRIEVAL_DOCUMENT): a row's words never change. One per retriever."""

    def __init__(self, embedder: Embedder):
        self.embedder = embedder
        self._vecs: dict[int, np.ndarray] = {}          # by scratch id, oldest first

    async def embed(self, rows: Sequence[tuple[int, str]], *, degraded: list[str]) -> list[np.ndarray | None]:
        """`rows`' vectors; when the embedder fails, only those already kept (their words still
        match; said in `degraded`)."""
        missing = [(i, text) for i, text in rows if i not in self._vecs]
        if missing:
            try:
                vecs = await self.embedder.embed([text for _, text in missing], "RETRIEVAL_DOCUMENT")
            except Exception as exc:  # noqa: BLE001 - recall degrades, it does not fail
                degraded.append(f"working memory by words only (embedding failed: {type(exc).__name__})")
                return [self._vecs.get(i) for i, _ in rows]
            while self._vecs and len(self._vecs) + len(missing) > VECTORS_KEPT:
                self._vecs.pop(next(iter(self._vecs)))
            self._vecs.update((i, np.asarray(v, np.float32)) for (i, _), v in zip(missing, vecs, strict=True))
        return [self._vecs.get(i) for i, _ in rows]


@dataclass(frozen=True)
class WorkingHit:
    """An unflushed scratch row that matches the query."""

    scratch_id: int
    content: str
    source_tag: str
    created_at: datetime
    fts_score: float                     # ts_rank; 0.0 when its words do not match
    speaker: Speaker | None = None       # who said it; None: no speaker known
    cosine: float | None = None          # with the question (the user's lines); None: not compared


_WORKING = f"""
WITH q AS (SELECT {QUESTION_TSQUERY} AS query)
SELECT id, content, source_tag, created_at, speaker, coalesce(score, 0) AS score FROM (
  SELECT b.id, b.content, b.source_tag, b.created_at, b.metadata->>'speaker' AS speaker,
         CASE WHEN to_tsvector('english', left(b.content, 100000)) @@ q.query
              THEN ts_rank(to_tsvector('english', left(b.content, 100000)), q.query) END AS score
    FROM scratch_buffer b, q
   WHERE b.flushed_at IS NULL
     AND b.metadata->>'memory_mode' IS DISTINCT FROM 'off'
     AND NOT b.id = ANY($2::bigint[])
     AND b.content IS DISTINCT FROM $1
     AND (to_tsvector('english', left(b.content, 100000)) @@ q.query
          OR ($4 AND b.source_tag = '{USER_SOURCE}'))
) rows
 ORDER BY score DESC NULLS LAST, id DESC
 LIMIT $3
"""


async def recall_working(db: Executor, query: str, *, limit: int, exclude: Sequence[int] = (),
                         query_vec: np.ndarray | None = None, embed: Embed | None = None,
                         floor: float | None = None) -> list[WorkingHit]:
    """Up to `limit` unflushed scratch rows matching `query`, best first: by its words, and
    (with `query_vec`, `embed` and `floor`) the user's own lines by their vector; see the
    module docstring for what is left out."""
    if limit <= 0 or not query.strip():
        return []
    by_vector = query_vec is not None and embed is not None and floor is not None
    rows = await db.fetch(_WORKING, query, [int(i) for i in exclude], SCAN_LIMIT, by_vector)
    hits = [WorkingHit(r["id"], r["content"], r["source_tag"], r["created_at"], float(r["score"]),
                       speaker_of(r["source_tag"], {"speaker": r["speaker"]}))
            for r in rows
            if r["source_tag"] not in CLASSIFIED_SOURCES or classify(r["content"]).kind == "statement"]
    if by_vector:
        hits = await _with_cosines(hits, query_vec, embed)
    return fused(hits, floor)[:limit]


async def _with_cosines(hits: list[WorkingHit], query_vec: np.ndarray, embed: Embed) -> list[WorkingHit]:
    """The user's lines with their cosine to the question (the others as they are)."""
    users = [h for h in hits if h.source_tag == USER_SOURCE]
    if not users:
        return hits
    vecs = await embed([(h.scratch_id, h.content) for h in users])
    q = np.asarray(query_vec, np.float32)
    q = q / (float(np.linalg.norm(q)) or 1.0)
    cosines = {}
    for h, v in zip(users, vecs, strict=True):
        if v is not None:
            v = np.asarray(v, np.float32)
            cosines[h.scratch_id] = float(v @ q) / (float(np.linalg.norm(v)) or 1.0)
    return [WorkingHit(h.scratch_id, h.content, h.source_tag, h.created_at, h.fts_score, h.speaker,
                       cosines.get(h.scratch_id)) for h in hits]


def fused(hits: Sequence[WorkingHit], floor: float | None) -> list[WorkingHit]:
    """The hits that match by words or (at a cosine of at least `floor`) by vector, ordered
    by reciprocal rank over the two lists; a row in both comes first. Pure."""
    by_words = sorted((h for h in hits if h.fts_score > 0), key=lambda h: (-h.fts_score, -h.scratch_id))
    by_vector = ([] if floor is None else
                 sorted((h for h in hits if h.cosine is not None and h.cosine >= floor),
                        key=lambda h: (-(h.cosine or 0.0), -h.scratch_id)))
    score: dict[int, float] = {}
    for ranked in (by_words, by_vector):
        for rank, h in enumerate(ranked, start=1):
            score[h.scratch_id] = score.get(h.scratch_id, 0.0) + 1.0 / (FUSE_K + rank)
    return sorted((h for h in hits if h.scratch_id in score), key=lambda h: (-score[h.scratch_id], -h.scratch_id))


def not_recalled(working: Sequence[WorkingHit], recalled: set[str]) -> list[WorkingHit]:
    """Working hits whose words are not a recalled memory's (`recalled`: their contents): read
    first, a line may have been flushed into a memory the search then found."""
    return [w for w in working if w.content not in recalled]
