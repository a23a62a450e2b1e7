"""Overview, thoughts and gates pages: data from src/web/queries.py, plots from svg.py."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime

from src.bootstrap.readiness import readiness
from src.web import queries as q
from src.web import svg
from src.web.escape import esc
from src.web.html import Page, data_html, figure, kv, memory_link, plots, section, table
from src.web.view import View
from src.weights.center_summary import CENTER_BINS

HIST_BINS = CENTER_BINS     # the bins the center summary keeps (sql/080)


def _by_day(rows: list[dict], key: str) -> tuple[list[str], dict[str, list[float]]]:
    """Rows of (day, key, n) as x labels and one series per key value."""
    days = sorted({r["day"] for r in rows})
    series: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(days))
    index = {d: i for i, d in enumerate(days)}
    for r in rows:
        series[str(r[key])][index[r["day"]]] += float(r["n"])
    return [d.strftime("%m-%d") for d in days], dict(sorted(series.items()))


async def overview(view: View) -> Page:
    """Age, restarts, uptime, cycles, memories, readiness, cost, safety, providers, plots."""
    data = await _overview_data(view)
    return Page("Overview", data, lambda: _overview_html(view, data))   # built in a worker thread (src/web/app.py)


async def _overview_data(view: View) -> dict:
    """What the overview shows: its JSON answer, which the HTML renders."""
    cfg = view.settings
    man = await q.manifest(view.pool) or {}
    session = view.session_id or man.get("current_session_id")
    types = await q.memories_by_type(view.pool)
    milestones = await readiness(view.pool)
    cost = await q.cost_totals(view.pool, session)
    per_day = await q.cost_per_day(view.pool, cfg.plot_days)
    events = await q.safety_events(view.pool, 20)
    models = await q.models_in_use(view.pool, 20)
    if (await q.table_exists(view.pool, ["memory_center_summary"]))["memory_center_summary"]:
        hist, shapes = await q.center_histogram(view.pool, HIST_BINS), await q.shape_counts(view.pool)
    else:   # a mind not started since sql/080: scan, as before
        hist, shapes = await q.center_histogram_scan(view.pool, HIST_BINS), await q.shape_counts_scan(view.pool)
    shape_days = await q.shape_changes_per_day(view.pool, cfg.plot_days)
    cycles_session = view.cycles() if view.cycles is not None else man.get("cycles_session")
    budget = (await view.budget()).as_json() if view.budget is not None else None
    facts = {
        "mode": view.mode, "session_id": session, "age_days": man.get("age_days"),
        "created_at": man.get("created_at"), "restarts": man.get("times_restarted"),
        "uptime_hours_before_this_session": man.get("uptime_total_hours"),
        "uptime_hours_this_session": man.get("session_hours"), "last_started_at": man.get("last_started_at"),
        "last_shutdown_at": man.get("last_shutdown_at"), "cycles_total": man.get("cycles_total"),
        "cycles_this_session": cycles_session, "embed_model": man.get("embed_model"),
    }
    return {
        "facts": facts, "memories_by_type": types,
        "readiness": [{"key": a.key, "title": a.title, "reached_at": a.reached_at, "event": a.event}
                      for a in milestones],
        "cost": cost, "cost_per_day": per_day, "budget": budget, "safety_phases": view.safety_modes,
        "safety_events": events, "providers": view.providers_report, "models_called": models,
        "center_histogram": hist, "shapes_now": shapes, "shape_changes_per_day": shape_days,
    }


def _overview_plots(data: dict) -> str:
    """Centers now, contested/uninformed per day, cost per day: each says when it has nothing to draw."""
    hist, shapes, per_day, shape_days = (data["center_histogram"], data["shapes_now"], data["cost_per_day"],
                                         data["shape_changes_per_day"])
    days = len(per_day)
    labels = [f"{(r['bin'] - 1) / HIST_BINS:.2f}" for r in hist]
    contested = [float(r["contested"]) for r in shape_days]
    uninformed = [float(r["uninformed"]) for r in shape_days]
    shape_title = (f"Weight changes ending contested / uninformed, per day (now: {shapes.get('contested', 0)} "
                   f"contested, {shapes.get('uninformed', 0)} uninformed)")
    shape_plot = (svg.line_chart(shape_title, [r["day"].strftime("%m-%d") for r in shape_days],
                                 {"contested": contested, "uninformed": uninformed}, y_min=0)
                  if any(contested) or any(uninformed) else
                  svg.no_data(shape_title, f"no weight change in the last {days} days left a memory contested "
                                           "or uninformed"))
    return plots(
        figure(svg.bar_chart("Weight centers (memories per bin)", labels, [float(r["n"]) for r in hist],
                             empty="no memories yet"),
               "Memories per bin of their weight's center α/(α+β), 0–1 (no unit): how much the mind "
               "trusts what it keeps, now."),
        figure(shape_plot, "Memories per day (UTC) whose last weight change that day left them contested "
                           "(α > 5 and β > 5: strong evidence both ways) or uninformed (α < 2 and β < 2)."),
        figure(svg.bar_chart("Cost per day (USD)", [r["day"].strftime("%m-%d") for r in per_day],
                             [float(r["cost"]) for r in per_day],
                             empty=f"no model call cost anything in the last {days} days (reflex mode "
                                   "calls no model)"),
               "US dollars per day (UTC) spent on model calls (llm_calls), failed calls included."))


def _overview_html(view: View, data: dict) -> list[str]:
    """The overview's plots, facts and tables."""
    facts, cost = data["facts"], data["cost"]
    events, models, types = data["safety_events"], data["models_called"], data["memories_by_type"]
    session, cycles_session = facts["session_id"], facts["cycles_this_session"]
    return [
        _overview_plots(data),
        kv([("mode", view.mode), ("session", session), ("age (days)", facts["age_days"]),
            ("born", facts["created_at"]), ("restarts", facts["restarts"]),
            ("uptime before this session (h)", facts["uptime_hours_before_this_session"]),
            ("uptime this (or the last) session (h)", facts["uptime_hours_this_session"]),
            ("cycles, lifetime", facts["cycles_total"]),
            ("cycles, this session", cycles_session), ("embed model", facts["embed_model"])]),
        section("Memories by type", table(types, ["memory_type", "n"])),
        section("Readiness milestones", table(data["readiness"], [
            "title", "reached_at", ("what did it", lambda r: data_html(r["event"]))])),
        section("Cost (USD)", kv([("this session", cost.get("session")), ("last 24 h", cost.get("day")),
                                  ("lifetime", cost.get("lifetime")), ("calls", cost.get("calls")),
                                  ("failed calls", cost.get("failed"))])),
        _budget_html(data["budget"]),
        section("Safety", kv([(f"phase {p}", m) for p, m in view.safety_modes.items()]) if view.safety_modes
                else "<p class=muted>phases: not known to this viewer</p>",
                table(events, ["at", "ceiling", "phase", ("memory", lambda r: memory_link(r["memory_id"])),
                               "enforced", "reason"], "no safety events")),
        section("Providers", "<ul>" + "".join(f"<li>{esc(line)}</li>" for line in view.providers_report)
                + "</ul>", table(models, ["provider", "model", "calls", "last_day"], "no model calls recorded")),
    ]


def _budget_html(budget: dict | None) -> str:
    """What internal work may still spend (issue 24): its calls this hour, its spend in 24 h."""
    if budget is None:
        return ""
    if not budget["enabled"]:
        return section("Background budget", "<p class=muted>off (budget.enabled: false)</p>")
    return section("Background budget (what the mind's own work may still spend)", kv([
        ("calls this hour", f"{budget['calls_used']} of {budget['calls_limit']}"),
        ("of which idle thought (DMN, gut)", f"{budget['idle_used']} of {budget['idle_limit']}"),
        ("spent in 24 h (USD)", f"{budget['cost_used_usd']:.4f} of {budget['cost_limit_usd']:.2f}"),
        ("calls left: consolidation / idle thought",
         f"{budget['consolidation_calls_left']} / {budget['idle_calls_left']}")]))


def _candidates(raw: str | None) -> list[dict]:
    try:
        value = json.loads(raw or "[]")
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def _tag(candidate: dict) -> str:
    """A candidate's source tag, the name the winners' chart uses too (rows before the tag was
    stored carry only the short source name)."""
    return str(candidate.get("source_tag") or candidate.get("source") or "?")


def session_breaks(rows: list[dict]) -> list[datetime]:
    """The times at which a new session's first row appears (oldest-first rows with session_id)."""
    return [b["at"] for a, b in zip(rows, rows[1:], strict=False) if a.get("session_id") != b.get("session_id")]


def _thought_plots(timeline: list[dict], winners: list[dict], days: int) -> str:
    """Salience, winners, confidence and cost over time; the same colour for a source in every chart."""
    times, restarts = [r["at"] for r in timeline], session_breaks(timeline)
    sources = sorted({_tag(c) for r in timeline for c in r["candidates"] if isinstance(c, dict)})
    salience = {s: [max((float(c.get("salience", 0)) for c in r["candidates"]
                         if isinstance(c, dict) and _tag(c) == s), default=None) for r in timeline]
                for s in sources}
    day_labels, by_source = _by_day(winners, "source")
    colors = {s: svg.source_color(s) for s in {*sources, *by_source}}
    costs = [float(r["cost_usd"]) for r in timeline]
    cost_chart = (svg.time_chart("Cost per cycle (USD)", times, {"cost": costs}, boundaries=restarts, y_min=0)
                  if any(costs) else svg.no_data("Cost per cycle (USD)", "no cycle yet" if not timeline else
                                                 "no cycle shown cost anything (reflex mode calls no model)"))
    return plots(
        figure(svg.time_chart("Salience of the candidates per cycle (max per source)", times, salience,
                              boundaries=restarts, y_min=0, colors=colors, empty="no cycle yet"),
               "Salience (no unit): 0.3·novelty + 0.3·goal relevance + 0.2·emotional charge + 0.2·urgency of "
               "each source's strongest candidate; the highest wins the cycle. Dashed: a restart."),
        figure(svg.stacked_bars("Attention winners by source per day", day_labels, by_source, colors=colors,
                                empty=f"no cycle in the last {days} days"),
               "Cycles per day (UTC), by the source of the input that won attention."),
        figure(svg.time_chart("Confidence per cycle", times, {"confidence": [r["confidence"] for r in timeline]},
                              boundaries=restarts, y_min=0, y_max=1,
                              empty="no cycle yet" if not timeline else
                              "no cycle shown has a confidence (replies in reflex mode, without a model, carry none)"),
               "The cycle's confidence in its own output, 0–1 (no unit); low confidence escalates to a "
               "stronger model. Dashed: a restart."),
        figure(cost_chart, "US dollars the cycle spent on model calls, at the time of the cycle (UTC)."))


async def thoughts(view: View) -> Page:
    """thought_log as a timeline: winner, candidates' salience, escalations, confidence, cost."""
    cfg = view.settings
    rows = await q.thoughts(view.pool, cfg.page_rows)
    for r in rows:
        r["candidates"] = _candidates(r["candidates"])
        r["winner"] = json.loads(r["winner"]) if r["winner"] else None
    winners = await q.winners_per_day(view.pool, cfg.plot_days)
    escalations = await q.escalations(view.pool, 50)
    data = {"thoughts": rows, "winners_per_day": winners, "escalations": escalations}

    def candidates_cell(r: dict) -> str:
        return "<br>".join(f"{'★ ' if c.get('won') else ''}{esc(_tag(c))} "
                           f"{esc(c.get('salience'))}: {esc(str(c.get('text', ''))[:80])}"
                           for c in r["candidates"] if isinstance(c, dict))

    def body() -> list[str]:     # built in a worker thread (src/web/app.py)
        return [
            _thought_plots(list(reversed(rows)), winners, cfg.plot_days),
            section(f"Last {len(rows)} cycles", table(rows, [
                "at", "session_id", "cycle", "source_tag", "attention_focus", ("candidates", candidates_cell),
                "output", "confidence", "escalated", "cost_usd", "duration_ms"])),
            section("Escalations", table(escalations, ["at", "path", "threshold", "confidence_before",
                                                       "confidence_after_retry", "escalated", "system2_ok",
                                                       "attention_focus", "reason"], "no escalations")),
        ]
    return Page("Thoughts", data, body)


async def gates(view: View) -> Page:
    """Decisions per matrix cell over time, noise flips, what was dropped and why."""
    cfg = view.settings
    cells = await q.gate_cells_per_day(view.pool, cfg.plot_days)
    matrix = await q.gate_matrix(view.pool)
    flips = await q.gate_decisions(view.pool, actions=None, noise_only=True, limit=cfg.page_rows)
    dropped = await q.gate_decisions(view.pool, actions=["drop", "skip"], noise_only=False, limit=cfg.page_rows)
    recent = await q.gate_decisions(view.pool, actions=None, noise_only=False, limit=cfg.page_rows)
    day_labels, by_cell = _by_day(cells, "cell")
    data = {"cells_per_day": cells, "matrix": matrix, "noise_flips": flips, "dropped": dropped,
            "recent": recent}
    cols = ["at", "gate", "action", "cell_relevance", "cell_novelty", "cell_action", "noise_fired",
            ("memory", lambda r: memory_link(r["memory_id"])), "content_preview", "reason"]
    def body() -> list[str]:     # built in a worker thread (src/web/app.py)
        return [
            plots(figure(svg.stacked_bars("Exit-gate decisions per matrix cell per day", day_labels, by_cell,
                                          empty="no exit-gate decision yet"),
                         "Decisions per day (UTC) by the exit gate, by cell of its relevance/novelty matrix.")),
            section("Decisions per cell and action", table(matrix, ["gate", "relevance", "novelty", "action", "n",
                                                                    "flips"])),
            section("Noise flips", table(flips, cols + ["random_draw", "noise_rate"], "no noise flips")),
            section("Dropped or skipped, and why", table(dropped, cols + ["rule"], "nothing dropped")),
            section("Recent decisions", table(recent, cols)),
        ]
    return Page("Gates", data, body)
