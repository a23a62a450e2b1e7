"""Consolidation and gut pages: what the background parts have written so far."""

from __future__ import annotations

from src.web import queries as q
from src.web import svg
from src.web.html import Page, memory_link, plots, section, table
from src.web.view import View

# Actors that are not consolidation: recall and the gates change weights too.
FOREGROUND_ACTORS = ("retrieval", "exit_gate", "entry_gate")


async def consolidation(view: View) -> Page:
    """Weight changes by actor and the recent non-retrieval changes."""
    cfg = view.settings
    by_actor = await q.weight_changes_by_actor(view.pool, cfg.plot_days)
    recent = await q.recent_weight_changes(view.pool, FOREGROUND_ACTORS, cfg.page_rows)
    data = {"weight_changes_by_actor": by_actor, "recent_background_changes": recent}
    body = [
        section(f"Weight changes by actor, last {cfg.plot_days} days", table(by_actor, [
            "actor", "operation", "n", "applied", "last_at"], "no weight changes")),
        section("Recent changes outside recall and the gates", table(recent, [
            "at", ("memory", lambda r: memory_link(r["memory_id"])), "actor", "operation", "reason",
            "applied_delta", "alpha_after", "beta_after"], "none yet")),
    ]
    return Page("Consolidation", data, body)


async def gut(view: View) -> Page:
    """The emotional charge the exit gate measured, per day."""
    cfg = view.settings
    charge = await q.charge_per_day(view.pool, cfg.plot_days)
    data = {"charge_per_day": charge}
    labels = [r["day"].strftime("%m-%d") for r in charge]
    body = [
        plots(svg.line_chart("Emotional charge at the exit gate per day", labels,
                             {"mean": [r["mean"] for r in charge], "max": [r["max"] for r in charge]},
                             y_min=0)),
        section("Per day", table(charge, ["day", "n", "mean", "max"], "no charge measured yet")),
    ]
    return Page("Gut", data, body)
