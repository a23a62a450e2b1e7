"""Memories: the filtered list (paged), one memory's page; search is src/web/search_page.py.

Every memory shown says when it was said, absolute and relative to the page's `now`, and
when it was stored where that is more than a day apart (src/recall/dated.py). The memory
page's supersedes links are named in words (`LINK_WORDS`): an update (sql/153) is an
earlier and a later statement, not a derivation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from urllib.parse import urlencode

from src.recall.dated import said_words
from src.web import queries as q
from src.web import svg
from src.web.errors import BadRequest
from src.web.escape import esc
from src.web.html import Page, figure, kv, memory_link, plots, section, table
from src.web.search_page import search
from src.web.view import View

__all__ = ["BadRequest", "memories", "memory_page"]

MEMORY_TYPES = ("episodic", "semantic", "procedural", "preference", "reflection", "correction",
                "narrative", "tension")
ACCESS_SHOWN = 50
CHAIN_DEPTH = 5
CONTENT_SHOWN = 20_000        # characters of a memory's text on its page (a memory may hold a megabyte)
MAX_PAGE = 100_000            # OFFSET beyond this many pages is a scan no guardian needs
#: A supersedes link in words, by the row's direction and the link's `via`; "{}" is the
#: memory at the link's other end (`parent`).
LINK_WORDS = {
    ("built_from", "update"): "earlier statement: {} updates it",
    ("built_on", "update"): "later statement: it updates {}",
    ("built_from", "merge"): "merged into {}",
    ("built_on", "merge"): "merged from {} and others",
    ("built_from", "insight"): "evidence for insight {}",
    ("built_on", "insight"): "insight drawn from {}",
    ("built_from", "narrative"): "told in narrative {}",
    ("built_on", "narrative"): "narrative told from {}",
}


def _dated(rows: list[dict], now: datetime) -> list[dict]:
    """`rows` with each memory's "said" in words (their created_at and event_time stay, for JSON)."""
    for row in rows:
        row["said"] = said_words(row["event_time"], row["created_at"], now)
    return rows


def _link_words(row: Mapping[str, object]) -> str:
    return LINK_WORDS.get((str(row["direction"]), str(row["via"])), f"{row['via']} link with {{}}")


def _linked(rows: list[dict]) -> list[dict]:
    """Chain rows with their link in words ("earlier statement: #40 updates it"), for JSON."""
    for row in rows:
        row["link"] = _link_words(row).format(f"#{row['parent']}")
    return rows


def _link_cell(row: Mapping[str, object]) -> str:
    """The link in words, the memory at its other end a link to its page."""
    before, _, after = _link_words(row).partition("{}")
    return esc(before) + memory_link(row["parent"]) + esc(after)


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


def _page_param(params: Mapping[str, str]) -> int:
    """`?page=` (1 = the newest): a whole number; "²" and "٣" are digits to str.isdigit, not to us."""
    raw = params.get("page", "").strip() or "1"
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_PAGE:
        raise BadRequest(f"page must be a whole number from 1 to {MAX_PAGE:,}, got {raw[:40]!r}")
    return int(raw)


async def memories(view: View, params: Mapping[str, str]) -> Page:
    """`?q=` searches (read-only recall, every component); otherwise the filtered list, a page at a time."""
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
        return await search(view, query, params, form)
    page = _page_param(params)
    rows = await q.list_memories(view.pool, memory_type=mtype, source=source, min_center=lo, max_center=hi,
                                 limit=cfg.page_rows + 1, offset=(page - 1) * cfg.page_rows)
    rows = _dated(rows, view.clock())
    more = len(rows) > cfg.page_rows
    rows = rows[:cfg.page_rows]
    filters = {"type": mtype, "source": source, "min_center": lo, "max_center": hi}
    data = {"filters": filters, "page": page, "page_rows": cfg.page_rows, "more": more, "memories": rows}
    first = (page - 1) * cfg.page_rows + 1
    title = (f"Newest {len(rows)} matching" if page == 1 else
             f"Matching, newest first: {first:,}–{first + len(rows) - 1:,}" if rows else f"Page {page}")

    def body() -> list[str]:     # built in a worker thread (src/web/app.py)
        return [form, section(title, _pager(filters, page, more), table(rows, [
            ("id", lambda r: memory_link(r["id"])), "memory_type", "source_tag", "center", "alpha", "beta",
            "access_count", "said", "content"], "no memories match"),
            _pager(filters, page, more))]
    return Page("Memories", data, body)


def _pager(filters: Mapping[str, object], page: int, more: bool) -> str:
    """Links to the newer and older pages, keeping the filters."""
    keep = {k: v for k, v in filters.items() if v is not None}

    def link(n: int, text: str) -> str:
        return f'<a href="/memories?{esc(urlencode({**keep, "page": n}))}">{esc(text)}</a>'
    parts = ([link(page - 1, f"← newer (page {page - 1})")] if page > 1 else []) + \
            ([link(page + 1, f"older (page {page + 1}) →")] if more else [])
    return f"<p class=pager>page {page} " + " ".join(parts) + "</p>" if parts else ""


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
    now = view.clock()
    row["said"] = said_words(row["event_time"], row["created_at"], now)
    history = await q.weight_history(view.pool, memory_id, cfg.page_rows)
    neighbours = await q.co_access_neighbours(view.pool, memory_id, 50)
    chain = _linked(_dated(await q.supersedes_chain(view.pool, memory_id, CHAIN_DEPTH, 100), now))
    decisions = await q.gate_decisions_for(view.pool, memory_id, 50)
    alpha, beta = row["alpha"], row["beta"]
    lo, hi = svg.beta_interval(alpha, beta)
    weight = {"alpha": alpha, "beta": beta, "center": alpha / (alpha + beta), "interval_90": [lo, hi],
              "contested": alpha > 5 and beta > 5, "uninformed": alpha < 2 and beta < 2}
    data = {"memory": row, "weight": weight, "weight_history": history, "co_access": neighbours,
            "supersedes": chain, "gate_decisions": decisions}
    steps = list(reversed(history))
    restarts = await q.session_starts(view.pool, steps[0]["at"], steps[-1]["at"]) if steps else []
    link_cols = [("id", lambda r: memory_link(r["id"]))]
    def body() -> list[str]:
        return [
            kv([("type", row["memory_type"]), ("source", row["source_tag"]),
                ("source confidence", row["source_confidence"]), ("immutable", row["immutable"]),
                ("said", row["said"]), ("created", row["created_at"]), ("event time", row["event_time"]),
                ("last accessed", row["last_accessed"]), ("access count", row["access_count"]),
                ("embed model", row["embed_model"])]),
            f"<pre>{esc(row['content'])}</pre>" + (
                f"<p class=muted>first {CONTENT_SHOWN:,} of {row['content_chars']:,} characters</p>"
                if row["content_chars"] > CONTENT_SHOWN else ""),
            plots(figure(svg.beta_density(alpha, beta),
                         "Density of the weight Beta(α, β) over 0–1 (no unit); dashed: the center α/(α+β), "
                         "shaded: where the weight lies with 90% probability."),
                  _center_plot(steps, restarts)),
            section("Weight changes (consolidation_log)", table(history, [
                "at", "actor", "operation", "reason", "requested_delta", "applied_delta", "alpha_before",
                "beta_before", "alpha_after", "beta_after"], "no weight changes yet")),
            section(f"Access history (last {ACCESS_SHOWN})",
                    table([{"at": t} for t in row["accesses"]], ["at"], "never accessed")),
            section("Co-access neighbours", table(neighbours, link_cols + [
                "co_access_count", "last_co_accessed", "memory_type", "content"], "no co-access partners")),
            section("Why do I believe this? (supersedes, both ways)", table(chain, [
                "direction", "depth", *link_cols, ("link", _link_cell), "memory_type", "said", "center",
                "content"], "not built from or into other memories, nor updated")),
            section("Gate decisions about it", table(decisions, ["at", "gate", "action", "cell_relevance",
                                                                 "cell_novelty", "noise_fired", "wrote_it",
                                                                 "content_preview", "reason"], "none")),
        ]
    return Page(f"Memory #{memory_id}", data, body)


def _center_plot(steps: list[dict], restarts: list[datetime]) -> str:
    """The center after each change, over time (log row ids are not a time axis)."""
    centers = [r["alpha_after"] / (r["alpha_after"] + r["beta_after"]) if r["alpha_after"] is not None
               else None for r in steps]
    chart = svg.time_chart("Center after each weight change", [r["at"] for r in steps], {"center": centers},
                           boundaries=restarts, y_min=0, y_max=1,
                           empty="no weight change yet: the center is still the one it was stored with")
    return figure(chart, "Center α/(α+β), 0–1 (no unit), after each change in consolidation_log, at the time "
                         "of the change (UTC); dashed lines: the mind restarted.")
