"""`/memories?q=`: the read-only recall pipeline with every component, at a reproducible draw.

Recall is stochastic (a Dirichlet draw blends the relevance components; ACT-R adds
logistic noise), so two identical searches rank differently. A guardian who reloads
to look again would see the order move with nothing saying why; the page therefore
draws from a seed fixed per query (or `?seed=`), says so, and links to another draw.

Each result says when it was said (src/recall/dated.py), relative to the page's `now`; its
JSON `said` is the model's words for that date, as the operator CLI's `search --json`.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from src.recall.dated import said_words
from src.recall.explain import result_json, working_json
from src.recall.retrieval import Recalled
from src.recall.when import memory_time, said_when
from src.web.errors import BadRequest
from src.web.escape import esc
from src.web.html import Page, fmt, kv, memory_link, section, table
from src.web.view import View

RESULT_CHARS = 500            # characters of each search result's text
MAX_QUERY_CHARS = 2000        # longer is not a search a person typed; embedding it costs for nothing
SEED_DIGITS = 18
RESULT_COLUMNS = ("rank", "id", "final", "center", "type", "source", "said", "content")


def query_seed(query: str) -> int:
    """The seed a query draws from when none is given: the same text, the same draw."""
    return int.from_bytes(hashlib.sha256(" ".join(query.split()).encode()).digest()[:4], "big")


def seed_param(params: Mapping[str, str], query: str) -> int:
    """`?seed=` (a whole number) or the query's own seed."""
    raw = params.get("seed", "").strip()
    if not raw:
        return query_seed(query)
    if not (raw.isascii() and raw.isdigit()) or len(raw) > SEED_DIGITS:
        raise BadRequest(f"seed must be a whole number of at most {SEED_DIGITS} digits, got {raw[:40]!r}")
    return int(raw)


def _recalled(r: Recalled, rank: int, near_miss: bool, now: datetime) -> dict[str, Any]:
    """The operator CLI's numbers for one memory (src/recall/explain.py), plus rank, near-miss
    and `said`, the model's words for its date."""
    row = {"rank": rank, "near_miss": near_miss, **result_json(r),
           "said": said_when(memory_time(r.hit.event_time, r.hit.created_at), now)}
    row["content"] = row["content"][:RESULT_CHARS]
    return row


async def search(view: View, query: str, params: Mapping[str, str], form: str) -> Page:
    """Recall `query` without touching a weight or an access count; every component shown."""
    if len(query) > MAX_QUERY_CHARS:
        raise BadRequest(f"the search text is {len(query):,} characters; at most {MAX_QUERY_CHARS:,}")
    if view.retriever is None:
        raise BadRequest("search needs the embedder; this viewer was started without one")
    seed = seed_param(params, query)
    # the mind's retriever as it is now (its layers, gut, evolved factors), on the view's own
    # pool: a search never takes one of the mind's connections (issue 24)
    retriever = copy.copy(view.retriever)
    retriever.pool = view.pool
    result = await retriever.retrieve(query, rng=view.rng(seed), mutate=False)
    now = view.clock()
    hits = [_recalled(r, i, False, now) for i, r in enumerate(result.memories, 1)]
    hits += [_recalled(r, i, True, now) for i, r in enumerate(result.near_misses, len(hits) + 1)]
    working = [{**working_json(w), "said": said_when(w.created_at, now)} for w in result.working]
    data = {"query": query, "seed": seed, "working": working, "results": hits, "blend": result.blend,
            "reranked": result.reranked, "rerank_skipped_reason": result.rerank_skipped_reason,
            "degraded": result.degraded, "timings_ms": result.timings_ms, "read_only": True}
    notes = [f"rerank skipped: {result.rerank_skipped_reason}"] if result.rerank_skipped_reason else []

    def body() -> list[str]:     # built in a worker thread (src/web/app.py)
        return [form, "<p class=muted>Read-only recall: nothing was reinforced or accessed by this search. "
                + esc(" ".join(notes + result.degraded)) + "</p>", draw_note(query, seed),
                kv([(f"blend: {k}", v) for k, v in result.blend.items()]),
                *([section(f"{len(working)} just said, not yet consolidated (scratch buffer)", table(working, [
                    "scratch_id", "source_tag", "said", "fulltext_score", "content"], ""))]
                  if working else []),
                section(f"{len(result.memories)} recalled, {len(result.near_misses)} near misses",
                        results_table(hits, now))]
    return Page(f"Memories recalled for “{query[:80]}”", data, body)


def draw_note(query: str, seed: int) -> str:
    """Why a ranking can differ from the mind's own recall, and how to see another draw."""
    other = "/memories?" + urlencode({"q": query, "seed": seed + 1})
    return ("<p class=muted>Recall is random by design: a Dirichlet draw blends the relevance components and "
            "ACT-R adds noise, so the same search can rank differently each time the mind recalls. This page "
            f"draws from seed {seed}, fixed for this search text, so reloading shows the same ranking "
            f"(until the memories themselves change). <a href=\"{esc(other)}\">Another draw (seed {seed + 1})"
            "</a>.</p>")


def _components(r: Mapping[str, Any]) -> str:
    """How the final score came about, as one wrapping paragraph under the result."""
    se, ar, rel = r["search"], r["act_r"], r["relevance"]
    parts = [f"search {se['score']} (vector #{se['vector_rank'] or '—'} cos {se['cosine']}, full text "
             f"#{se['fulltext_rank'] or '—'}, the user's own #{se['own_rank'] or '—'}, rrf {se['rrf']}, "
             f"recency {se['recency']})",
             f"ACT-R B {ar['B']} + S {ar['S']} + P {ar['P']} + ε {ar['noise']} = A {ar['A']}, "
             f"P(retrieve) {ar['p_retrieve']}",
             "relevance " + str(rel["value"]) + " = " + ", ".join(f"{k} {v}" for k, v in rel["components"].items()),
             f"weighted {r['weighted']}, coactivation {r['coactivation']}, rerank {fmt(r['rerank']) or '—'}"]
    return " · ".join(esc(p) for p in parts)


def results_table(hits: list[dict[str, Any]], now: datetime) -> str:
    """One row per memory with its text given the room, and its components in a row beneath.

    The components once sat in a no-wrap cell of their own, which pushed the text column
    off the right edge of a 1400 px window, one word per line (issue 26)."""
    if not hits:
        return "<p class=muted>nothing recalled</p>"
    out = ["<table class=results><tr>", *(f"<th>{esc(h)}</th>" for h in RESULT_COLUMNS), "</tr>"]
    for r in hits:
        rank = f"{r['rank']}" + (" <span class=muted>near miss</span>" if r["near_miss"] else "")
        cells = [rank, memory_link(r["id"]), esc(fmt(r["final"])), esc(fmt(r["center"])), esc(r["memory_type"]),
                 esc(r["source_tag"]), esc(_said(r, now))]
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + f"<td class=t>{esc(r['content'])}</td></tr>")
        out.append(f"<tr><td></td><td class=why colspan={len(RESULT_COLUMNS) - 1}>{_components(r)}</td></tr>")
    out.append("</table>")
    return "".join(out)


def _said(r: Mapping[str, Any], now: datetime) -> str:
    """When a result was said, and stored where apart (src/recall/dated.py), from its JSON times."""
    event, created = (datetime.fromisoformat(r[k]) if r[k] else None for k in ("event_time", "created_at"))
    return said_words(event, created, now)
