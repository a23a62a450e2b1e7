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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from src.db.sql import Executor
from src.gates.utterance import classify
from src.recall.search import QUESTION_TSQUERY
from src.recall.speakers import Speaker, speaker_of

#: The mark every surface shows on a working-memory hit.
NOT_CONSOLIDATED = "just said, not yet consolidated"
#: Sources whose lines are classified before they are offered (the user's own words).
CLASSIFIED_SOURCES = frozenset({"external_user"})
#: Rows read per query before the question/chatter filter (the buffer is small).
SCAN_LIMIT = 50


@dataclass(frozen=True)
class WorkingHit:
    """An unflushed scratch row that matches the query."""

    scratch_id: int
    content: str
    source_tag: str
    created_at: datetime
    fts_score: float
    speaker: Speaker | None = None       # who said it; None: no speaker known


_WORKING = f"""
WITH q AS (SELECT {QUESTION_TSQUERY} AS query)
SELECT b.id, b.content, b.source_tag, b.created_at, b.metadata->>'speaker' AS speaker,
       ts_rank(to_tsvector('english', left(b.content, 100000)), q.query) AS score
  FROM scratch_buffer b, q
 WHERE q.query IS NOT NULL
   AND b.flushed_at IS NULL
   AND b.metadata->>'memory_mode' IS DISTINCT FROM 'off'
   AND NOT b.id = ANY($2::bigint[])
   AND b.content IS DISTINCT FROM $1
   AND to_tsvector('english', left(b.content, 100000)) @@ q.query
 ORDER BY score DESC, b.id DESC
 LIMIT $3
"""


async def recall_working(db: Executor, query: str, *, limit: int,
                         exclude: Sequence[int] = ()) -> list[WorkingHit]:
    """Up to `limit` unflushed scratch rows matching `query`, best first; see the module
    docstring for what is left out."""
    if limit <= 0 or not query.strip():
        return []
    rows = await db.fetch(_WORKING, query, [int(i) for i in exclude], SCAN_LIMIT)
    hits = [WorkingHit(r["id"], r["content"], r["source_tag"], r["created_at"], float(r["score"]),
                       speaker_of(r["source_tag"], {"speaker": r["speaker"]}))
            for r in rows
            if r["source_tag"] not in CLASSIFIED_SOURCES or classify(r["content"]).kind == "statement"]
    return hits[:limit]
