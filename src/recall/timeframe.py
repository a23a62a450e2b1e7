"""The time a question names (issue 37 item 2): "last week", "in May", "two years ago".

`question_time(text, now)` gives the period a question names as a `TimeFrame` (UTC, start
inclusive, end exclusive, either side open), or None; src/recall/in_time.py narrows and
boosts recall with it. `asks_when` tells a question that asks *when* something happened;
`asks_before` one that asks about an earlier state ("Where did my sister live before?",
src/recall/current.py ranks the superseded statement first for it).

The library is parsedatetime (Apache-2.0): month and weekday names, relative phrases ("three
days ago", "last month") and absolute dates are its; it finds the phrase in a sentence
(`Calendar.nlp`) and says how exact it is (`pdtContext` accuracy), which sets the period's
width. Measured on REALTALK's questions that name a time (notes.md): it finds about as many
as dateparser's `search_dates` at a twentieth of the time (~0.2 ms against ~5 ms a
question: recall runs every turn). What it gets wrong for questions, mended here:
- it reads a bare month or weekday forward ("in May" in November: next May); a question
  asks about the past, so a period after `now` moves back a year (a month) or a week (a day);
- a bare number ("my locker code 7419") comes back with no accuracy: no period;
- "in 2023" it reads as a time of day: a year on its own is read here as that year;
- it knows no holidays: `HOLIDAYS` names the few whose date is fixed;
- "a few years ago" it does not count: read as "3 years ago" (`_VAGUE_COUNTS`).
Widths: a day; a week is the calendar week (Monday to Sunday) the date falls in; a month;
a year; "N years ago" a year wide centred on that date (people round: "two years ago" means
about then). "before X" / "until X" end at X's period, "after X" / "since X" start after
(since: at) it. "before I moved" names an event, not a date: no period (the event's memory
says when it was, src/recall/current.py links what it changed).
The text is cut to `MAX_CHARS` first: a question is short, and the parser's regular
expressions run over all of it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import parsedatetime

log = logging.getLogger(__name__)

#: Characters of a question given to the parser.
MAX_CHARS = 500
#: Holidays with a fixed date: (month, first day, days).
HOLIDAYS = {"christmas": (12, 24, 3), "xmas": (12, 24, 3), "new year's eve": (12, 31, 1),
            "new year": (1, 1, 1), "halloween": (10, 31, 1), "valentine's day": (2, 14, 1),
            "bonfire night": (11, 5, 1)}
_YEAR = re.compile(r"\b(?:in|during|of|from)\s+((?:19|20)\d{2})\b", re.I)
#: Vague counts the parser does not read, as the number people usually mean.
_VAGUE_COUNTS = {"a few": "3", "a couple of": "2", "a couple": "2", "several": "4", "some": "3"}
_VAGUE = re.compile(r"\b(a few|a couple of|a couple|several|some)\s+(?=(?:days|weeks|months|years)\s+ago\b)", re.I)
_OPEN_BEFORE = ("before", "until", "till", "prior to", "by")
_OPEN_AFTER = ("after", "since")
_WHEN = re.compile(r"^\s*(?:and\s+|so\s+|but\s+)?(?:when|since when|what date|which date|what day|what year|"
                   r"which year|what month|which month|how long ago|how many (?:days|weeks|months|years) ago)\b",
                   re.I)
_WHEN_INSIDE = re.compile(r"[,;:]\s*(?:when|what date|how long ago)\b(?!\s+(?:i|we|you|he|she|they)\s+"
                          r"(?:was|were|am|is|are)\s+(?:young|little|small|a kid|a child)\b)", re.I)
_BEFORE = re.compile(r"\b(?:before|used to|use to|previously|originally|formerly|at first|at the start|"
                     r"in the past|back then|earlier|anymore|any more|no longer|(?:my|our|his|her|the) "
                     r"(?:old|former|previous|last|ex)\b|ex-)", re.I)
#: "before" that opens a clause about a routine is no look back ("before I go to bed").
_BEFORE_ROUTINE = re.compile(r"\bbefore\s+(?:i|we|you)\s+(?:go|leave|sleep|eat|start|get|do)\b", re.I)

_CALENDAR = parsedatetime.Calendar(version=parsedatetime.VERSION_CONTEXT_STYLE)
_CTX = parsedatetime.pdtContext


@dataclass(frozen=True)
class TimeFrame:
    """A period: `start` inclusive, `end` exclusive, UTC; None is open."""

    start: datetime | None
    end: datetime | None
    phrase: str

    def holds(self, at: datetime) -> bool:
        at = _utc(at)
        return (self.start is None or self.start <= at) and (self.end is None or at < self.end)


def question_time(text: str, now: datetime) -> TimeFrame | None:
    """The period `text` names, relative to `now`, or None (never raises)."""
    try:
        return _question_time(str(text)[:MAX_CHARS].replace("\u2019", "'"), _utc(now))
    except Exception as exc:     # a parser's error must not cost a recall
        log.debug("no time read from a question: %s", exc)
        return None


def asks_when(text: str) -> bool:
    """Whether the question asks when something happened ("When did I move to Leeds?")."""
    text = str(text)[:MAX_CHARS]
    return bool(_WHEN.search(text) or _WHEN_INSIDE.search(text))


def asks_before(text: str) -> bool:
    """Whether the question asks about an earlier state, not the current one."""
    text = str(text)[:MAX_CHARS].replace("\u2019", "'")
    found = _BEFORE.search(text)
    return found is not None and not _BEFORE_ROUTINE.search(text)


def _question_time(text: str, now: datetime) -> TimeFrame | None:
    lower = text.lower()
    for name, (month, day, days) in HOLIDAYS.items():
        if re.search(rf"\b{re.escape(name)}\b", lower):
            start = datetime(now.year, month, day, tzinfo=UTC)
            if start > now:
                start = start.replace(year=now.year - 1)
            return _opened(lower, name, TimeFrame(start, start + timedelta(days=days), name))
    year = _YEAR.search(text)
    if year is not None:
        start = datetime(int(year.group(1)), 1, 1, tzinfo=UTC)
        return _opened(lower, year.group(0).lower(), TimeFrame(start, start.replace(year=start.year + 1),
                                                               year.group(0)))
    # the parser counts in numbers: "a few years ago" is about three
    counted = _VAGUE.sub(lambda m: _VAGUE_COUNTS[m.group(1).lower()] + " ", text)
    found = _CALENDAR.nlp(counted, sourceTime=now.replace(tzinfo=None))
    for at, ctx, _, _, phrase in found or ():
        frame = _frame(at.replace(tzinfo=UTC), ctx, phrase.strip(), now)
        if frame is not None:
            return _opened(lower, phrase.strip().lower(), frame)
    return None


def _frame(at: datetime, ctx, phrase: str, now: datetime) -> TimeFrame | None:
    """The period of one parsed phrase, by how exact the parser says it is."""
    acc = ctx.accuracy
    if not acc or not re.search(r"[a-z]", phrase.lower()):
        return None                     # a bare number: a code, a count, no time
    day = at.replace(hour=0, minute=0, second=0, microsecond=0)
    if acc & _CTX.ACU_DAY or acc & (_CTX.ACU_HOUR | _CTX.ACU_MIN | _CTX.ACU_HALFDAY | _CTX.ACU_NOW):
        if day > now and not acc & _CTX.ACU_YEAR:
            day -= timedelta(days=7)   # "on Tuesday": the last one, not the next
        return TimeFrame(day, day + timedelta(days=1), phrase)
    if acc & _CTX.ACU_WEEK:
        monday = day - timedelta(days=day.weekday())
        return TimeFrame(monday, monday + timedelta(days=7), phrase)
    if acc & _CTX.ACU_MONTH:
        first = day.replace(day=1)
        if first > now:
            first = first.replace(year=first.year - 1)    # "in May": the last May
        return TimeFrame(first, _next_month(first), phrase)
    if acc & _CTX.ACU_YEAR:
        if "ago" in phrase.lower():     # "two years ago": about then
            return TimeFrame(at - timedelta(days=183), at + timedelta(days=183), phrase)
        first = day.replace(month=1, day=1)
        return TimeFrame(first, first.replace(year=first.year + 1), phrase)
    return None


def _opened(lower: str, phrase: str, frame: TimeFrame) -> TimeFrame:
    """"before X" ends at X's period, "after X" starts after it, "since X" at it."""
    at = lower.find(phrase)
    head = lower[:at].rstrip() if at >= 0 else ""
    said = phrase
    for word in _OPEN_BEFORE:
        if head.endswith(word) or said.startswith(word + " "):
            return TimeFrame(None, frame.start, frame.phrase)
    for word in _OPEN_AFTER:
        if head.endswith(word) or said.startswith(word + " "):
            return TimeFrame(frame.start if word == "since" else frame.end, None, frame.phrase)
    return frame


def _next_month(first: datetime) -> datetime:
    return first.replace(year=first.year + 1, month=1) if first.month == 12 else first.replace(month=first.month + 1)


def _utc(at: datetime) -> datetime:
    return at.astimezone(UTC) if at.tzinfo is not None else at.replace(tzinfo=UTC)
