"""Bootstrap readiness achievements (plan §5.2): what `/readiness` shows.

Each milestone is an event the mind recorded when it did the thing (see
`src/bootstrap/milestones.py` for the call sites), so `/readiness` can show when each
was reached and by what: the ids in the event are the memories, cycles and outcomes
involved, to be looked up with SQL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg

from src.bootstrap.milestones import TITLES, reached
from src.terminal import escape
from src.text import cut

KEYS: tuple[str, ...] = (
    "memory_formation", "retrieval_success", "consolidation_cycle", "goal_promotion", "dmn_acted_upon",
    "identity_promotion", "conflict_resolution", "creative_association", "goal_achieved", "aligned_decision",
)


@dataclass(frozen=True)
class Achievement:
    key: str
    title: str
    reached_at: datetime | None
    event: dict = field(default_factory=dict)


async def readiness(db: asyncpg.Pool | asyncpg.Connection) -> list[Achievement]:
    """All ten milestones in one round trip."""
    done = await reached(db)
    return [Achievement(key, title, *(done.get(i, (None, {}))))
            for i, (key, title) in enumerate(zip(KEYS, TITLES, strict=True), 1)]


def _ids(prefix: str, value: object) -> str:
    ids = value if isinstance(value, list) else [value]
    return f"{prefix} " + ", ".join(f"#{i}" for i in ids)


def _quoted(value: object) -> str:
    return f'"{cut(" ".join(str(value).split()), 60)}"'


#: How each event key reads in a sentence (src/bootstrap/milestones.py lists who records what).
_PHRASES: dict[str, Callable[[object], str]] = {
    "memory_ids": lambda v: _ids("memories" if isinstance(v, list) and len(v) != 1 else "memory", v),
    "memory_id": lambda v: _ids("memory", v),
    "recalled": lambda v: _ids("recalled", v),
    "pass_id": lambda v: _ids("deep pass", v),
    "dmn_item_id": lambda v: _ids("DMN item", v),
    "outcome_id": lambda v: _ids("outcome", v),
    "value_id": lambda v: _ids("value memory", v),
    "cycle": lambda v: f"cycle {v}",
    "declared_cycle": lambda v: f"declared in cycle {v}",
    "reflection_cycle": lambda v: f"reflected on in cycle {v}",
    "semantic": lambda v: f"similarity {float(v):.2f}",
    "similarity": lambda v: f"similarity {float(v):.2f}",
    "insights": lambda v: f"{v} insight(s)",
    "merged": lambda v: f"{v} merged",
    "narratives": lambda v: f"{v} narrative(s)",
    "actions": lambda v: "actions " + ", ".join(map(str, v)) if isinstance(v, list) else f"actions {v}",
}
_QUOTED = ("query", "prompt", "goal", "value", "answer", "reflection")
#: The order a phrase's parts are said in (jsonb hands keys back shortest first); others last.
_ORDER = {key: i for i, key in enumerate((
    "pass_id", "cycle", "dmn_item_id", "memory_ids", "memory_id", "tier", "center", "recalled", "measure", "semantic",
    "how", "value_id", "value", "similarity", "goal", "outcome_id", "declared_cycle", "reflection_cycle",
    "insights", "merged", "narratives", "query", "prompt", "answer", "reflection", "path", "reason",
    "actions"))}


def event_text(event: dict, limit: int = 160) -> str:
    """A milestone's event as a phrase: "memories #5, #6; entry → scratch → exit → persist".

    Not JSON: `/readiness` and the log are read by a person (issue 26). Known keys read as
    words (`_PHRASES`), texts are quoted and cut, anything else is "key value".
    """
    event = dict(event)
    if "center_before" in event and "center_after" in event:
        event["center"] = f"weight center {float(event.pop('center_before')):.2f} → {float(event.pop('center_after')):.2f}"
    parts = []
    for key, value in sorted(event.items(), key=lambda kv: _ORDER.get(kv[0], len(_ORDER))):
        if value in (None, "", []):
            continue
        if key in _PHRASES:
            parts.append(_PHRASES[key](value))
        elif key in _QUOTED:
            parts.append(f"{key} {_quoted(value)}")
        elif key == "tier":
            parts.append(f"{value} tier")
        elif key in ("path", "how", "reason", "center", "measure"):
            parts.append(str(value))
        else:
            parts.append(f"{key.replace('_', ' ')} {value}")
    return escape(cut("; ".join(parts), limit)) or "no details recorded"


def format_readiness(achievements: list[Achievement]) -> str:
    done = sum(a.reached_at is not None for a in achievements)
    lines = [f"Readiness: {done}/{len(achievements)} achievements"]
    for i, a in enumerate(achievements, 1):
        when = a.reached_at.strftime("%Y-%m-%d %H:%M") if a.reached_at else "not yet"
        mark = "x" if a.reached_at else " "
        lines.append(f" [{mark}] {i:2d}. {a.title} — {when}")
        if a.reached_at:
            lines.append(f"        by {event_text(a.event)}")
    return "\n".join(lines)
