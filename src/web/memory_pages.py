"""Memories: search through the read-only recall pipeline, filters, and one memory's page."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from src.recall.explain import result_json, working_json
from src.recall.retrieval import Recalled
from src.web import queries as q
from src.web import svg
from src.web.escape import esc
from src.web.html import Page, kv, memory_link, plots, section, table
from src.web.view import View

MEMORY_TYPES = ("episodic", "semantic", "procedural", "preference", "reflection", "correction",
                "narrative", "tension")
ACCESS_SHOWN = 50
CHAIN_DEPTH = 5
RESULT_CHARS = 500            # characters of each search result's text
CONTENT_SHOWN = 20_000        # characters of a memory's text on its page (a memory may hold a megabyte)


class BadRequest(ValueError):
    """A query parameter the guardian can fix; the message says how."""


def _center_param(params: Mapping[str, str], name: str) -> float | None:
    raw = params.get(name, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a number between 0 and 1, got {raw[:40]!r}") from None
    if not 0.0 <= value <= 1.0:
        raise BadRequest(f"{name} must be between 0 and 1, got {value}")
    return value


def _recalled(r: Recalled, rank: int, near_miss: bool) -> dict[str, Any]:
    """The operator CLI's numbers for one memory (src/recall/explain.py), plus rank and near-miss."""
    row = {"rank": rank, "near_miss": near_miss, **result_json(r)}
    row["content"] = row["content"][:RESULT_CHARS]
    return row


async def memories(view: View, params: Mapping[str, str]) -> Page:
    """`?q=` searches (read-only recall, every component); otherwise the filtered list."""
    cfg = view.settings
    query = params.get("q", "").strip()
    mtype = params.get("type", "").strip() or None
    if mtype is not None and mtype not in MEMORY_TYPES:
        raise BadRequest(f"type must be one of {', '.join(MEMORY_TYPES)}, got {mtype[:40]!r}")
    source = params.get("source", "").strip() or None
    lo, hi = _center_param(params, "min_center"), _center_param(params, "max_center")
    sources = await q.source_tags(view.pool, 50)
    form = _search_form(query, mtype, source, lo, hi, sources)
    if query:
        return await _search(view, query, form)
    rows = await q.list_memories(view.pool, memory_type=mtype, source=source, min_center=lo, max_center=hi,
                                 limit=cfg.page_rows)
    data = {"filters": {"type": mtype, "source": source, "min_center": lo, "max_center": hi},
            "memories": rows}
    def body() -> list[str]:     # built in a worker thread (src/web/app.py)
        return [form, section(f"Newest {len(rows)} matching", table(rows, [
            ("id", lambda r: memory_link(r["id"])), "memory_type", "source_tag", "center", "alpha", "beta",
            "access_count", "created_at", "content"], "no memories match"))]
    return Page("Memories", data, body)


async def _search(view: View, query: str, form: str) -> Page:
    if view.retriever is None:
        raise BadRequest("search needs the embedder; this viewer was started without one")
    result = await view.retriever.retrieve(query, rng=view.rng(), mutate=False)
    hits = [_recalled(r, i, False) for i, r in enumerate(result.memories, 1)]
    hits += [_recalled(r, i, True) for i, r in enumerate(result.near_misses, len(hits) + 1)]
    working = [working_json(w) for w in result.working]
    data = {"query": query, "working": working, "results": hits, "blend": result.blend, "reranked": result.reranked,
            "rerank_skipped_reason": result.rerank_skipped_reason, "degraded": result.degraded,
            "timings_ms": result.timings_ms, "read_only": True}

    def comps(r: dict) -> str:
        se, ar, rel = r["search"], r["act_r"], r["relevance"]
        parts = [f"search {se['score']}: vector #{se['vector_rank'] or '—'} cos {se['cosine']}, full text "
                 f"#{se['fulltext_rank'] or '—'}, rrf {se['rrf']}, recency {se['recency']}",
                 f"ACT-R: B {ar['B']} + S {ar['S']} + P {ar['P']} + ε {ar['noise']} = A {ar['A']}, "
                 f"P(retrieve) {ar['p_retrieve']}",
                 "relevance " + str(rel["value"]) + " = " + ", ".join(f"{k} {v}" for k, v in
                                                                     rel["components"].items())]
        return "<span style='white-space:nowrap'>" + "<br>".join(esc(p) for p in parts) + "</span>"

    notes = [f"rerank skipped: {result.rerank_skipped_reason}"] if result.rerank_skipped_reason else []
    def body() -> list[str]:
        return [form, "<p class=muted>Read-only recall: nothing was reinforced or accessed by this search. "
                + esc(" ".join(notes + result.degraded)) + "</p>",
                kv([(f"blend: {k}", v) for k, v in result.blend.items()]),
                *([section(f"{len(working)} just said, not yet consolidated (scratch buffer)", table(working, [
                    "scratch_id", "source_tag", "created_at", "fulltext_score", "content"], ""))]
                  if working else []),
                section(f"{len(result.memories)} recalled, {len(result.near_misses)} near misses", table(hits, [
                    "rank", ("id", lambda r: memory_link(r["id"])), "near_miss", "final", "rerank", "weighted",
                    "coactivation", ("components", comps), "center", "memory_type", "source_tag", "content"],
                    "nothing recalled"))]
    return Page(f"Memories recalled for “{query[:80]}”", data, body)


def _search_form(query: str, mtype: str | None, source: str | None, lo: float | None, hi: float | None,
                 sources: list[str]) -> str:
    def options(values, chosen) -> str:
        return "<option value=''>any</option>" + "".join(
            f"<option{' selected' if v == chosen else ''} value=\"{esc(v)}\">{esc(v)}</option>" for v in values)

    return ("<form method=get action=/memories>"
            f"<input name=q size=40 placeholder='search (read-only recall)' value=\"{esc(query)}\"> "
            f"type <select name=type>{options(MEMORY_TYPES, mtype)}</select> "
            f"source <select name=source>{options(sources, source)}</select> "
            f"center ≥ <input name=min_center size=4 value=\"{esc(lo if lo is not None else '')}\"> "
            f"≤ <input name=max_center size=4 value=\"{esc(hi if hi is not None else '')}\"> "
            "<button>show</button></form>")


async def memory_page(view: View, memory_id: int) -> Page | None:
    """One memory: Beta plot, accesses, weight history, neighbours, supersedes chain, gate decisions."""
    cfg = view.settings
    row = await q.memory(view.pool, memory_id, ACCESS_SHOWN, CONTENT_SHOWN)
    if row is None:
        return None
    row["metadata"] = json.loads(row["metadata"])
    history = await q.weight_history(view.pool, memory_id, cfg.page_rows)
    neighbours = await q.co_access_neighbours(view.pool, memory_id, 50)
    chain = await q.supersedes_chain(view.pool, memory_id, CHAIN_DEPTH, 100)
    decisions = await q.gate_decisions_for(view.pool, memory_id, 50)
    alpha, beta = row["alpha"], row["beta"]
    lo, hi = svg.beta_interval(alpha, beta)
    weight = {"alpha": alpha, "beta": beta, "center": alpha / (alpha + beta), "interval_90": [lo, hi],
              "contested": alpha > 5 and beta > 5, "uninformed": alpha < 2 and beta < 2}
    data = {"memory": row, "weight": weight, "weight_history": history, "co_access": neighbours,
            "supersedes": chain, "gate_decisions": decisions}
    steps = list(reversed(history))
    centers = [r["alpha_after"] / (r["alpha_after"] + r["beta_after"]) if r["alpha_after"] is not None
               else None for r in steps]
    link_cols = [("id", lambda r: memory_link(r["id"]))]
    def body() -> list[str]:
        return [
            kv([("type", row["memory_type"]), ("source", row["source_tag"]),
                ("source confidence", row["source_confidence"]), ("immutable", row["immutable"]),
                ("created", row["created_at"]), ("last accessed", row["last_accessed"]),
                ("access count", row["access_count"]), ("embed model", row["embed_model"])]),
            f"<pre>{esc(row['content'])}</pre>" + (
                f"<p class=muted>first {CONTENT_SHOWN:,} of {row['content_chars']:,} characters</p>"
                if row["content_chars"] > CONTENT_SHOWN else ""),
            plots(svg.beta_density(alpha, beta),
                  svg.line_chart("Center after each weight change", [str(r["id"]) for r in steps],
                                 {"center": centers}, y_min=0, y_max=1)),
            section("Weight changes (consolidation_log)", table(history, [
                "at", "actor", "operation", "reason", "requested_delta", "applied_delta", "alpha_before",
                "beta_before", "alpha_after", "beta_after"], "no weight changes yet")),
            section(f"Access history (last {ACCESS_SHOWN})",
                    table([{"at": t} for t in row["accesses"]], ["at"], "never accessed")),
            section("Co-access neighbours", table(neighbours, link_cols + [
                "co_access_count", "last_co_accessed", "memory_type", "content"], "no co-access partners")),
            section("Why do I believe this? (supersedes, both ways)", table(chain, ["direction", "depth"] + link_cols
                    + ["memory_type", "center", "content"], "not built from or into other memories")),
            section("Gate decisions about it", table(decisions, ["at", "gate", "action", "cell_relevance",
                                                                 "cell_novelty", "noise_fired", "wrote_it",
                                                                 "content_preview", "reason"], "none")),
        ]
    return Page(f"Memory #{memory_id}", data, body)
