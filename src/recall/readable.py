"""Recall for a person: the `/memory` table and the legend `/help` prints once (issue 26).

The pipeline's own numbers (src/recall/explain.py) are for the operator CLI and the web
view. At the prompt they misled: `final` is min-max normalised over the reranked batch,
so the top hit read `score 1.000` even when nothing matched ("/memory whale" → "what do
I keep?"), and the weight's "center" was never explained. The table shows instead:

    of best   the score that ordered the rows as a share of the best one's: the hybrid
              score (`weighted`), or with a reranker the final score (the top is 100%
              by construction: it orders the rows, it says nothing about the match).
              Not `final` without a reranker: min-max over the batch put the last row at 0
    words     whether the memory contains a word of the query (the full-text arm found it)
    meaning   cosine similarity of the query and the memory (0 unrelated, 1 the same),
              the absolute measure of the match
    held      the center of the memory's Beta weight: how firmly the mind holds it
    said      when it was said, as the model reads it (its event time, else when it was
              stored; src/recall/dated.py's `short_when`: "25 Nov 2026, 3d ago")
    stored    only when a row was stored more than a day after it was said (an imported
              conversation): when it was stored; "—" on the other rows

and a closing line when no row shares a word with the query. Pure: a Retrieval and the
caller's `now` in, text out.
"""

from __future__ import annotations

from datetime import datetime

from src.recall.dated import short_when, stored_apart
from src.recall.retrieval import Recalled, Retrieval
from src.recall.when import memory_time
from src.recall.working import NOT_CONSOLIDATED
from src.terminal import escape
from src.text import excerpt

#: Characters of a memory's text in one row of the table.
TEXT_CHARS = 80
HEADER = ("memory", "of best", "words", "meaning", "held", "said", "kind", "text")
#: The column a table gains when a row was stored more than a day after it was said.
STORED = "stored"
_NUMERIC = {HEADER.index("of best"), HEADER.index("meaning"), HEADER.index("held")}

#: What `/help` says once about the table (short lines: a terminal is 80 columns).
LEGEND = (
    "Reading /memory: one row per memory recalled, best first.",
    "  of best  its recall score as a share of the best row's (the top row is always 100%)",
    "  words    yes when it contains a word you asked with",
    "  meaning  how close its meaning is to your words: 1 the same, 0 or below unrelated",
    "  held     how firmly the mind holds it, 0-1: the center (mean) of its Beta weight;",
    "           recall, consolidation and forgetting move it; 0.8 and above is identity",
    "  said     when it was said (an imported conversation keeps its own date),",
    "           e.g. \"25 Nov 2026, 3d ago\": d days, w weeks, mo months, y years",
    "  stored   shown when a row was stored over a day after it was said (an import)",
)


def _score(r: Recalled) -> float:
    """What ordered the row: the final score after a rerank, else the hybrid score."""
    return r.final if r.rerank is not None else r.weighted


def _row(r: Recalled, best: float, now: datetime, stored: bool) -> tuple[str, ...]:
    """One row; with `stored` the table has the stored column, "—" where it says nothing new."""
    h = r.hit
    share = f"{100 * _score(r) / best:.0f}%" if best > 0 else "—"
    meaning = f"{h.similarity:.2f}" if h.similarity is not None else "—"
    center = h.alpha / (h.alpha + h.beta)
    apart = stored_apart(h.event_time, h.created_at)
    return (f"#{h.id}", share, "yes" if h.fts_rank is not None else "no", meaning, f"{center:.2f}",
            short_when(memory_time(h.event_time, h.created_at), now),
            *([short_when(apart, now) if apart is not None else "—"] if stored else []),
            h.memory_type, escape(excerpt(" ".join(h.content.split()), TEXT_CHARS)))


def _header(stored: bool) -> tuple[str, ...]:
    at = HEADER.index("said") + 1
    return (*HEADER[:at], STORED, *HEADER[at:]) if stored else HEADER


def table(rows: list[tuple[str, ...]]) -> list[str]:
    """Columns padded to their widest cell; numbers right-aligned, the last column left open.
    The numeric columns all come before the said column, so the stored column moves none."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    out = []
    for row in rows:
        cells = [c.rjust(w) if i in _NUMERIC else c.ljust(w)
                 for i, (c, w) in enumerate(zip(row[:-1], widths, strict=True))]
        out.append("  " + "  ".join([*cells, row[-1]]).rstrip())
    return out


def memory_table(result: Retrieval, now: datetime) -> str:
    """The `/memory <words>` answer: working memory first (when each line was said), then the
    table and its notes. `now` is the caller's: the dates are relative to it."""
    lines = [f"{NOT_CONSOLIDATED} ({short_when(w.created_at, now)}): {escape(excerpt(w.content, 200))}"
             for w in result.working]
    if result.memories:
        best = max(_score(r) for r in result.memories)
        stored = any(stored_apart(r.hit.event_time, r.hit.created_at) is not None for r in result.memories)
        lines.append(f"{len(result.memories)} memor{'y' if len(result.memories) == 1 else 'ies'} recalled, "
                     "best first (/help explains the columns):")
        lines += table([_header(stored), *(_row(r, best, now, stored) for r in result.memories)])
        if all(r.hit.fts_rank is None for r in result.memories):
            lines.append("None of these contains a word you asked with: they were found by meaning alone.")
    if not lines:
        lines.append("nothing recalled")
    lines += [f"note: {escape(d)}" for d in result.degraded]
    if result.memories and result.rerank_skipped_reason:
        lines.append(f"note: not reranked ({escape(result.rerank_skipped_reason)})")
    return "\n".join(lines)
