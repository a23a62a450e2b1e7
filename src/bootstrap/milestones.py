"""Readiness milestones (plan §5.2) as events: recorded where the mind does the thing.

`record_milestone(db, number, event)` writes the first time milestone `number` was
reached, with the event that reached it (ids of memories, cycles, outcomes, …);
later calls are no-ops (idempotent), so a call site may fire on every occurrence.

Who records what (the call sites):
    1  memory formation      the loop, once the exit gate has persisted a scratch item
    2  retrieval success     the loop, when recall returns a memory it held before the
                             question that is relevant by a stated measure: its cosine to
                             the question at or above the embed model's floor (bootstrap
                             `relevant_similarity`) and a content word in common with the
                             question; never the question's own text (a memory stored from
                             this turn's input, or the same words)
    3  consolidation cycle   consolidation's deep pass (merge + insight + narrative)
    4  goal promotion        the weight choke point: an applied 'promotion' change that
                             leaves the memory at goal-equivalent weight (center >= 0.6)
    5  DMN acted upon        the loop, when a DMN self-prompt wins attention and the
                             model answers it
    6  identity promotion    the weight choke point: an applied 'promotion' change that
                             leaves the memory at identity-equivalent weight (center >= 0.8)
    7  conflict resolution   consolidation, when a tension memory is resolved
    8  creative association  the DMN, when channel 2 records an association
    9  goal achieved + reflected   the loop (see src/outcomes/goals.py)
    10 aligned decision      the loop (see src/outcomes/alignment.py)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import asyncpg

TITLES: tuple[str, ...] = (
    "First memory formation (entry → scratch → exit → persist)",
    "First retrieval success (a memory held before the question: cosine ≥ the embed model's floor, a word in common)",
    "First consolidation cycle (merge + insight + narrative)",
    "First goal-weight promotion (experience → goal-equivalent weight)",
    "First DMN self-prompt acted upon",
    "First identity-weight promotion (goal → identity-equivalent weight)",
    "First conflict resolution (reconsolidation)",
    "First creative association (DMN channel 2)",
    "First goal achieved and reflected upon",
    "First autonomous decision aligned with self-formed values",
)
#: Goal- and identity-equivalent weight (plan §4.3's ranges begin here; the promotion
#: settings' goal_center and identity_center hold the same values).
GOAL_CENTER = 0.6
IDENTITY_CENTER = 0.8

_RECORD = """
INSERT INTO readiness_events (milestone, reached_at, event)
VALUES ($1, COALESCE($2, now()), $3::jsonb)
ON CONFLICT (milestone) DO NOTHING
RETURNING milestone
"""
_ALL = "SELECT milestone, reached_at, event FROM readiness_events ORDER BY milestone"


async def record_milestone(db: asyncpg.Pool | asyncpg.Connection, number: int, event: Mapping[str, Any], *,
                           at: datetime | None = None) -> bool:
    """Record milestone `number` (1–10) with its event; True only the first time."""
    if not 1 <= number <= len(TITLES):
        raise ValueError(f"readiness milestone must be 1–{len(TITLES)}, got {number!r}")
    row = await db.fetchval(_RECORD, number, at, json.dumps(dict(event), default=str))
    return row is not None


async def reached(db: asyncpg.Pool | asyncpg.Connection) -> dict[int, tuple[datetime, dict]]:
    """{milestone: (reached_at, event)} for every milestone reached so far."""
    return {r["milestone"]: (r["reached_at"], json.loads(r["event"])) for r in await db.fetch(_ALL)}


def _tier(change: Any) -> str | None:
    """The promotion tier ('goal' / 'identity') the change names, if any."""
    evidence = getattr(change, "evidence", None) or {}
    tier = evidence.get("tier") if isinstance(evidence, Mapping) else None
    return tier or (change.reason.split()[0] if change.reason else None)


def _when(change: Any) -> datetime | None:
    """The change's own time (promotion writes its pass's `now` as evidence "at"), else None: now()."""
    evidence = getattr(change, "evidence", None) or {}
    at = evidence.get("at") if isinstance(evidence, Mapping) else None
    try:
        return datetime.fromisoformat(at) if isinstance(at, str) else None
    except ValueError:
        return None


async def promotion_milestones(conn: asyncpg.Connection, changes: Sequence[Any], outcomes: Sequence[Any]) -> None:
    """Milestones 4 and 6 from the weight choke point, by the weight reached, not the tier
    the promotion is for: an applied 'promotion' change that leaves the center at or above
    GOAL_CENTER reaches 4, at or above IDENTITY_CENTER reaches 6 (a goal-tier promotion that
    stops at 0.4 reaches neither). At the change's own time; in the caller's transaction."""
    for change, out in zip(changes, outcomes, strict=True):
        if change.actor != "promotion" or out.applied <= 0 or change.operation != "reinforce":
            continue
        before = out.alpha_before / (out.alpha_before + out.beta_before)
        after = out.center_after
        tier = _tier(change)
        event = {"memory_id": out.memory_id, "tier": tier, "center_before": round(before, 4),
                 "center_after": round(after, 4), "reason": change.reason}
        at = _when(change)
        if after >= GOAL_CENTER:
            await record_milestone(conn, 4, event, at=at)
        if after >= IDENTITY_CENTER:
            await record_milestone(conn, 6, event, at=at)


#: The deep-pass phases a consolidation cycle must have run for milestone 3 (plan §5.2:
#: "merge + insight + narrative").
CONSOLIDATION_PHASES = ("insights", "merge", "narrative")


def consolidation_milestone_hook(pool: asyncpg.Pool):
    """After-pass hook for the deep pass: milestone 3 once a pass finished ('done') with its
    insight, merge and narrative phases all run (none skipped) and at least one insight and
    one narrative written."""
    async def hook(report: Any) -> None:
        if report.status != "done":
            return
        phases = {name: report.phases.get(name) for name in CONSOLIDATION_PHASES}
        if any(p is None or p.get("skipped") for p in phases.values()):
            return
        counts = {name: p.get("counts", {}) for name, p in phases.items()}
        insights = counts["insights"].get("insights", 0) + counts["merge"].get("insights", 0)
        narratives = counts["narrative"].get("narratives", 0)
        if insights and narratives:
            await record_milestone(pool, 3, {"pass_id": report.pass_id, "insights": insights,
                                             "merged": counts["merge"].get("superseded", 0),
                                             "narratives": narratives})
    return hook
