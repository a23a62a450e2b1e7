"""When a memory was said, in words a small model reads well (issue 37 item 1).

Every memory line the model sees carries its date, absolute and relative: "(Wed 25 Nov
2026, 3 days ago)". The absolute date lets the model answer "when did I…"; the relative
one spares it date arithmetic, which small models get wrong. A memory's time is its
`event_time` when it has one (an imported conversation keeps the date it was held), else
when it was stored. Dates are the service's clock's (UTC); the system prompt says what
"now" is (`now_line`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime


def memory_time(event_time: datetime | None, created_at: datetime | None) -> datetime | None:
    """When a memory happened or was said: its event time, else when it was stored."""
    return event_time or created_at


def ago(at: datetime, now: datetime) -> str:
    """How long before `now`, in the largest unit that reads naturally."""
    days = (_utc(now).date() - _utc(at).date()).days
    if days < 0:
        return "later" if days < -1 else "tomorrow"
    if days == 0:
        return "today"
    if days == 1:
        return "yesterday"
    if days < 14:
        return f"{days} days ago"
    if days < 60:
        return f"{days // 7} weeks ago"
    if days < 730:
        return f"{days // 30} months ago"
    return f"{days // 365} years ago"


def said_when(at: datetime | None, now: datetime) -> str:
    """"Wed 25 Nov 2026, 3 days ago" ("today, 14:05" within the day); "" without a time."""
    if at is None:
        return ""
    at = _utc(at)
    if (_utc(now).date() - at.date()).days == 0:
        return f"today, {at:%H:%M}"
    return f"{at:%a} {at.day} {at:%b %Y}, {ago(at, now)}"


#: A `said_when` stamp in parentheses at the end of a text: what a model copies from the lines
#: it was shown into what it writes ("Kevin was born in Albania. (today, 08:55)").
STAMP_AT_END = re.compile(r"\s*\((?:today, \d{1,2}:\d{2}|[A-Z][a-z]{2} \d{1,2} [A-Z][a-z]{2} \d{4}, [^()]*)\)\s*$")


def without_stamp(text: str) -> str:
    """`text` without the `said_when` stamps a model copied to its end."""
    while (cut := STAMP_AT_END.sub("", text)) != text:
        text = cut
    return text


def the_date(at: datetime) -> str:
    """"28 Nov 2026": a date without the day's name or age (where a line says "until" it)."""
    at = _utc(at)
    return f"{at.day} {at:%b %Y}"


#: What `now_line` adds after the time: said once while a context in the window says it
#: (src/loop/turn_context.py), since it never changes.
WHEN_NOTE = "Each memory line says when it was said."


def now_line(now: datetime) -> str:
    """The context's line about the present."""
    now = _utc(now)
    return f"Now: {now:%A} {now.day} {now:%B %Y}, {now:%H:%M} UTC. {WHEN_NOTE}"


def _utc(at: datetime) -> datetime:
    return at.astimezone(UTC) if at.tzinfo is not None else at.replace(tzinfo=UTC)
