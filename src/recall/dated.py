"""A memory's dates as the operator reads them (issue 37 item 1): `/memory`, `search`, `why`
and the web view.

Each says when a memory was said in the words the model reads (src/recall/when.py: its
event time, else when it was stored: "Wed 25 Nov 2026, 3 days ago"), so what the operator
sees is what the model saw. Where the memory was stored more than `APART` from that time
(an imported conversation, stored long after it was held) the stored date follows it:
"Fri 3 May 2024, 2 years ago (stored today, 15:10)". Closer than that the two are one
moment to a reader (the exit gate stores a line minutes after it was said).

The terminal's `/memory` table has no room for a weekday and "3 days ago": `short_when`
is the same date cut to a table cell ("25 Nov 2026, 3d ago").
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from src.recall.when import ago, memory_time, said_when

#: How far the stored time may lie from the event time before both are shown.
APART = timedelta(days=1)
#: `ago`'s units as a table cell writes them ("3 days ago" -> "3d ago").
_SHORT_UNITS = {"day": "d", "week": "w", "month": "mo", "year": "y"}
_AGO = re.compile(r"(\d+) (day|week|month|year)s? ago")


def stored_apart(event_time: datetime | None, created_at: datetime | None) -> datetime | None:
    """When the memory was stored, if that is more than `APART` from its event time; else None."""
    if event_time is None or created_at is None:
        return None
    return created_at if abs(created_at - event_time) > APART else None


def said_words(event_time: datetime | None, created_at: datetime | None, now: datetime) -> str:
    """When it was said, as the model reads it, and when it was stored where that is apart;
    "" without a time."""
    said = said_when(memory_time(event_time, created_at), now)
    stored = stored_apart(event_time, created_at)
    return f"{said} (stored {said_when(stored, now)})" if stored is not None else said


def short_when(at: datetime | None, now: datetime) -> str:
    """"today 14:05" within the day, else "25 Nov 2026, 3d ago"; "" without a time."""
    if at is None:
        return ""
    at = at.astimezone(UTC) if at.tzinfo is not None else at.replace(tzinfo=UTC)
    words = ago(at, now)
    if words == "today":
        return f"today {at:%H:%M}"
    match = _AGO.fullmatch(words)
    relative = f"{match[1]}{_SHORT_UNITS[match[2]]} ago" if match else words
    return f"{at.day} {at:%b %Y}, {relative}"
