"""Consolidation and gut pages: what the background parts have written.

Their tables arrive with those parts' migrations; a page shows what exists and says
which part is still missing instead of failing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC
from typing import Any

from src.web import background_queries as bq
from src.web import queries as q
from src.web import svg
from src.web.escape import esc
from src.web.html import Cell, Page, data_html, figure, inline, memory_link, plots, section, table
from src.web.pages import session_breaks
from src.web.view import View

# Actors that are not consolidation: recall and the gates change weights too.
FOREGROUND_ACTORS = ("retrieval", "exit_gate", "entry_gate")
GUT_POINTS = 200
PASSES_BY_PHASE = 3          # the newest passes shown phase by phase


def _waits(what: str, table_name: str) -> str:
    return (f"<p class=muted>{esc(what)}: not in this mind yet (no {esc(table_name)} table); "
            "this section fills in once that part runs.</p>")


def _inline_cell(key: str) -> Cell:
    """A JSON column (counts, skipped) on one line, not raw JSON."""
    def cell(row: Mapping[str, Any]) -> str:
        return inline(row.get(key))
    return cell


def phase_rows(deep_pass: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A pass's checkpoints as rows: phase, status, model calls, what it counted, why it skipped."""
    rows = []
    for ph in deep_pass.get("phases") or []:
        if not isinstance(ph, Mapping):
            continue
        result = ph.get("result") if isinstance(ph.get("result"), Mapping) else {"result": ph.get("result")}
        counts = result.get("counts") if isinstance(result.get("counts"), Mapping) else {}
        rest = {k: v for k, v in result.items() if k not in ("calls", "counts", "skipped", "data")}
        rows.append({"phase": ph.get("phase"), "status": ph.get("status"), "calls": result.get("calls"),
                     "results": {**counts, **rest}, "skipped": result.get("skipped"), "data": result.get("data")})
    return rows


def _skipped(deep_pass: Mapping[str, Any]) -> str:
    """What a pass skipped: why, or how many phases when its phases are listed below."""
    skipped = deep_pass.get("skipped") or {}
    if not isinstance(skipped, Mapping):
        return inline(skipped)
    below = {r["phase"] for r in phase_rows(deep_pass) if r["skipped"]} & set(skipped)
    rest = inline({k: v for k, v in skipped.items() if k not in below})
    return ", ".join(([esc(f"{len(below)} phases (why: below)")] if below else []) + ([rest] if rest else []))


def _pass_sections(passes: list[dict]) -> list[str]:
    """The passes in one table, then the newest few phase by phase (each phase's counts as a line)."""
    out = [section("Deep passes", table(passes, [
        "id", "trigger", "status", "started_at", "finished_at", "resumed", "llm_calls", "llm_budget",
        "tokens_in", "tokens_out", ("results", lambda p: "by phase, below" if p["phases"] else inline(p["counts"])),
        ("skipped", _skipped), "error"], "no deep pass yet"))]
    for p in passes[:PASSES_BY_PHASE]:
        rows = phase_rows(p)
        if rows:
            out.append(section(f"Deep pass #{p['id']}, phase by phase", table(rows, [
                "phase", "status", "calls", ("results", _inline_cell("results")), "skipped",
                ("details", lambda r: data_html(r["data"]))])))
    return out


def _passes_plot(order: list[dict]) -> str:
    """Model calls per deep pass against its budget, labelled by when the pass started."""
    labels = [p["started_at"].astimezone(UTC).strftime("%m-%d %H:%M") if p["started_at"] else f"#{p['id']}"
              for p in order]
    chart = svg.stacked_bars("LLM calls per deep pass (of its budget)", labels,
                             {"calls": [float(p["llm_calls"]) for p in order],
                              "budget left": [float(max(p["llm_budget"] - p["llm_calls"], 0)) for p in order]},
                             empty="no deep pass has a call budget yet")
    return figure(chart, "Model calls each deep pass made and what was left of its budget (calls), by the "
                         "time the pass started (UTC), oldest first.")


async def consolidation(view: View) -> Page:
    """Deep passes with their calls and results, failures, approvals, weight changes by actor."""
    cfg = view.settings
    present = await q.table_exists(view.pool, ["consolidation_passes", "consolidation_failures", "approvals",
                                                "consolidation_findings"])
    by_actor = await bq.weight_changes_by_actor(view.pool, cfg.plot_days)
    recent = await bq.recent_weight_changes(view.pool, FOREGROUND_ACTORS, cfg.page_rows)
    data: dict = {"weight_changes_by_actor": by_actor, "recent_background_changes": recent,
                  "tables_present": present}
    body: list[str] = []
    if present["consolidation_passes"]:
        passes = await bq.consolidation_passes(view.pool, cfg.page_rows)
        for p in passes:
            for key in ("counts", "skipped", "phases"):
                p[key] = json.loads(p[key]) if p[key] else None
        data["passes"] = passes
        order = list(reversed(passes))
        body.append(plots(_passes_plot(order)))
        body += _pass_sections(passes)
    else:
        body.append(_waits("Deep consolidation passes", "consolidation_passes"))
    if present["consolidation_failures"]:
        data["failures"] = await bq.consolidation_failures(view.pool, 50)
        body.append(section("Failures", table(data["failures"], ["at", "pass_id", "phase", "error"], "none")))
    if present["consolidation_findings"]:
        data["contradictions"] = await bq.contradiction_findings(view.pool, cfg.page_rows)
        body.append(section("Contradictions the light ticker found (the next deep pass's reconsolidation "
                            "asks each, then marks it consumed)", table(data["contradictions"], [
            "at", ("memories", lambda r: " ".join(memory_link(i) for i in r["memory_ids"])), "layer",
            "similarity", "consumed_at", "consumed_pass", "outcome"], "none found")))
    if present["approvals"]:
        data["approvals"] = await bq.approvals(view.pool, 50)
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
    charge = await bq.charge_per_day(view.pool, cfg.plot_days)
    data: dict = {"charge_per_day": charge, "tables_present": present}
    body: list[str] = []
    svgs: list[str] = []
    if present["gut_deltas"]:
        data["gut_deltas"] = await bq.gut_magnitudes(view.pool, GUT_POINTS)
        svgs.append(_gut_plot(data["gut_deltas"]))
    svgs.append(figure(svg.line_chart("Emotional charge at the exit gate per day",
                                      [r["day"].strftime("%m-%d") for r in charge],
                                      {"mean": [r["mean"] for r in charge], "max": [r["max"] for r in charge]},
                                      y_min=0, empty="the exit gate has measured no charge yet"),
                       "Emotional charge of what the exit gate weighed, mean and max per day (UTC), 0–1 "
                       "(no unit): how squarely it sits in, or against, the mind's usual territory."))
    body.append(plots(*svgs))
    if present["gut_axes"]:
        data["axes"] = await bq.gut_axes(view.pool)
        body.append(section("Named axes (latest)", table(data["axes"], [
            "rank", "name", "explained_variance", "outcome_correlation", "outcomes_seen", "samples",
            "computed_at"], "no axes computed yet")))
    else:
        body.append(_waits("The two-centroid gut and its named axes", "gut_axes"))
    if present["gut_deltas"]:
        body.append(section("Recent gut deltas", table(list(reversed(data["gut_deltas"]))[:cfg.page_rows], [
            "at", "cycle", "magnitude", "source_tag", "context"], "none")))
    if present["dmn_items"]:
        data["dmn_items"] = await bq.dmn_items(view.pool, cfg.page_rows)
        body.append(section("Default-mode network items", table(data["dmn_items"], [
            "at", "channel", "text", "queued", "consumed_at"], "none yet")))
    else:
        body.append(_waits("The default-mode network", "dmn_items"))
    body.append(section("Emotional charge per day (v0.1, exit gate)", table(charge, ["day", "n", "mean", "max"],
                                                                             "no charge measured yet")))
    return Page("Gut", data, lambda: body)


def _gut_plot(deltas: list[dict]) -> str:
    """The gut's magnitude over time, restarts marked."""
    chart = svg.time_chart(f"Gut magnitude, last {len(deltas)} deltas", [d["at"] for d in deltas],
                           {"magnitude": [d["magnitude"] for d in deltas]}, boundaries=session_breaks(deltas),
                           y_min=0, empty="no gut reading yet")
    return figure(chart, "Magnitude |attention − subconscious| (no unit, 0–2): how far what the mind attends to "
                         "now lies from its usual territory (distance between means of unit vectors); one point "
                         "per cycle. Dashed: a restart.")
