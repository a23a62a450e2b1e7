"""Consolidation and gut pages: what the background parts have written.

Their tables arrive with those parts' migrations; a page shows what exists and says
which part is still missing instead of failing.
"""

from __future__ import annotations

import json

from src.web import queries as q
from src.web import svg
from src.web.escape import esc
from src.web.html import Page, memory_link, plots, section, table
from src.web.view import View

# Actors that are not consolidation: recall and the gates change weights too.
FOREGROUND_ACTORS = ("retrieval", "exit_gate", "entry_gate")
GUT_POINTS = 200


def _waits(what: str, table_name: str) -> str:
    return (f"<p class=muted>{esc(what)}: not in this mind yet (no {esc(table_name)} table); "
            "this section fills in once that part runs.</p>")


def _json_cell(key: str):
    def cell(row: dict) -> str:
        value = row.get(key)
        if not value or value in ("{}", "[]"):
            return ""
        return f"<code>{esc(value if isinstance(value, str) else json.dumps(value))[:600]}</code>"
    return cell


async def consolidation(view: View) -> Page:
    """Deep passes with their calls and results, failures, approvals, weight changes by actor."""
    cfg = view.settings
    present = await q.table_exists(view.pool, ["consolidation_passes", "consolidation_failures", "approvals"])
    by_actor = await q.weight_changes_by_actor(view.pool, cfg.plot_days)
    recent = await q.recent_weight_changes(view.pool, FOREGROUND_ACTORS, cfg.page_rows)
    data: dict = {"weight_changes_by_actor": by_actor, "recent_background_changes": recent,
                  "tables_present": present}
    body: list[str] = []
    if present["consolidation_passes"]:
        passes = await q.consolidation_passes(view.pool, cfg.page_rows)
        for p in passes:
            for key in ("counts", "skipped", "phases"):
                p[key] = json.loads(p[key]) if p[key] else None
        data["passes"] = passes
        order = list(reversed(passes))
        body.append(plots(svg.stacked_bars("LLM calls per deep pass (of its budget)",
                                           [f"#{p['id']}" for p in order],
                                           {"calls": [float(p["llm_calls"]) for p in order],
                                            "budget left": [float(max(p["llm_budget"] - p["llm_calls"], 0))
                                                            for p in order]})))
        body.append(section("Deep passes", table(passes, [
            "id", "trigger", "status", "started_at", "finished_at", "resumed", "llm_calls", "llm_budget",
            "tokens_in", "tokens_out", ("results", _json_cell("counts")), ("phases", _json_cell("phases")),
            ("skipped", _json_cell("skipped")), "error"], "no deep pass yet")))
    else:
        body.append(_waits("Deep consolidation passes", "consolidation_passes"))
    if present["consolidation_failures"]:
        data["failures"] = await q.consolidation_failures(view.pool, 50)
        body.append(section("Failures", table(data["failures"], ["at", "pass_id", "phase", "error"], "none")))
    if present["approvals"]:
        data["approvals"] = await q.approvals(view.pool, 50)
        body.append(section("Approvals (the guardian's decisions)", table(data["approvals"], [
            "id", "kind", "status", "created_at", "decided_at", "reason", "decision"], "none asked")))
    body += [
        section(f"Weight changes by actor, last {cfg.plot_days} days", table(by_actor, [
            "actor", "operation", "n", "applied", "last_at"], "no weight changes")),
        section("Recent changes outside recall and the gates", table(recent, [
            "at", ("memory", lambda r: memory_link(r["memory_id"])), "actor", "operation", "reason",
            "applied_delta", "alpha_after", "beta_after"], "none yet")),
    ]
    return Page("Consolidation", data, lambda: body)


async def gut(view: View) -> Page:
    """Gut magnitude over time and the named axes; DMN items; the exit gate's charge per day."""
    cfg = view.settings
    present = await q.table_exists(view.pool, ["gut_deltas", "gut_axes", "dmn_items"])
    charge = await q.charge_per_day(view.pool, cfg.plot_days)
    data: dict = {"charge_per_day": charge, "tables_present": present}
    body: list[str] = []
    svgs: list[str] = []
    if present["gut_deltas"]:
        deltas = await q.gut_magnitudes(view.pool, GUT_POINTS)
        data["gut_deltas"] = deltas
        svgs.append(svg.line_chart(f"Gut magnitude, last {len(deltas)} deltas",
                                   [str(d["cycle"] if d["cycle"] is not None else d["id"]) for d in deltas],
                                   {"magnitude": [d["magnitude"] for d in deltas]}, y_min=0))
    svgs.append(svg.line_chart("Emotional charge at the exit gate per day", [r["day"].strftime("%m-%d")
                                                                             for r in charge],
                               {"mean": [r["mean"] for r in charge], "max": [r["max"] for r in charge]},
                               y_min=0))
    body.append(plots(*svgs))
    if present["gut_axes"]:
        data["axes"] = await q.gut_axes(view.pool)
        body.append(section("Named axes (latest)", table(data["axes"], [
            "rank", "name", "explained_variance", "outcome_correlation", "outcomes_seen", "samples",
            "computed_at"], "no axes computed yet")))
    else:
        body.append(_waits("The two-centroid gut and its named axes", "gut_axes"))
    if present["gut_deltas"]:
        body.append(section("Recent gut deltas", table(list(reversed(data["gut_deltas"]))[:cfg.page_rows], [
            "at", "cycle", "magnitude", "source_tag", "context"], "none")))
    if present["dmn_items"]:
        data["dmn_items"] = await q.dmn_items(view.pool, cfg.page_rows)
        body.append(section("Default-mode network items", table(data["dmn_items"], [
            "at", "channel", "text", "queued", "consumed_at"], "none yet")))
    else:
        body.append(_waits("The default-mode network", "dmn_items"))
    body.append(section("Emotional charge per day (v0.1, exit gate)", table(charge, ["day", "n", "mean", "max"],
                                                                             "no charge measured yet")))
    return Page("Gut", data, lambda: body)
