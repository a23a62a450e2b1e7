"""The time a question names (issue 37 item 2): "last week", "in May", "two years ago".

`question_time(text, now)` gives the period a question names as a `TimeFrame` (UTC, start
inclusive, end exclusive, either side open), or None; src/recall/in_time.py narrows and
boosts recall with it, and reads the memories' own words with it for a question that
`asks_when`. `asks_before` tells a question about an earlier state ("Where did my sister live
before?"), for which src/recall/current.py ranks the superseded statement first.

The library is parsedatetime (Apache-2.0). Month and weekday names, counts ("three days
ago"), relative words ("last month") and written dates are its; it finds the phrase in a
sentence (`Calendar.nlp`) and says how exact it is (`pdtContext.accuracy`), which sets the
period's width. dateparser (BSD-3-Clause) was measured beside it on the 62 REALTALK questions
(bench/realconv_dataset.py) that name a time: alone it finds a date in more of them (54
against 38: it reads "14.01.2024" and "the 17th of January"), but with the mending below
around each, parsedatetime frames all 62 and dateparser 53, and parsedatetime takes a third
of dateparser's time at the median and a tenth at the 99th percentile (0.08 and 0.25 ms a
question), with no dependency of its own. Recall runs every user turn, so speed decides.

Widths, from what was named:
- a day ("yesterday", "on Tuesday", "5 January 2024", "three days ago", "last night");
- a calendar week, Monday to Sunday ("last week", "this week", "two weeks ago"); a weekend,
  Saturday and Sunday ("last weekend", src/recall/named_periods.py);
- a month ("last month", "in May", "a month ago"); a year ("in 2023", "last year");
- "N years ago": a year wide centred on that day, since people round ("two years ago" is
  about then, not that calendar year);
- vague counts ("a few years ago", "a couple of days ago") read as 3 (a couple: 2) and
  widened: a year wide for years as above, else one unit either side of the named one;
- "the past week", "the last three days": from that many units back to the end of today;
- holidays with a fixed date and seasons, which the parser does not know
  (src/recall/named_periods.py): "at Christmas" is 24-26 December, "last summer" June to
  August;
- "before X" / "prior to X" end where X starts; "by X" / "until X" where X ends; "after X"
  starts where X ends; "since X" / "from X" where X starts.
A name without a year means its most recent occurrence not after `now` ("in May" in
November: this May; "on Tuesday" on a Saturday: four days ago), since a question mostly asks
about the past; a question that looks ahead ("will", "planning", "next") keeps the parser's
forward reading. "before I moved" names an event, not a date: no period (that event's own
memory says when it was).

What the parser gets wrong for questions, mended here:
- "May I ask", "I may go": a month or weekday name alone counts only after a preposition
  ("in May", "on Tuesday") or capitalised inside the sentence ("What did I eat Tuesday?");
- durations read as offsets ("for 3 days", "once a month"): a count of units counts only
  with "ago" (or "last/this/next week|month|year");
- a time of day alone ("a morning walk", "at 5pm", "lunch") is no period; with a day word
  ("this morning", "last night") it is that day, taken from `now` (the parser reads those
  two by the machine's clock);
- a bare number ("my locker code 7419", "op 118") and a year alone ("2025", which it reads
  as 20:25) are no period; a year after a preposition or a season ("in 2023", "spring of
  2024") is that year;
- titles in double quotes ("11/22/63") are not read;
- it reads "before X" / "after X" as X shifted by a year: those words are hidden from it;
- dotted and dashed dates are day first ("10.01.2024" is 10 January, as everywhere dots are
  written); slashed ones month first unless the first number passes 12.
The text is cut to `MAX_CHARS` first and its runs of spaces and control characters made one
space: the parser's time grows with the square of the text (measured: 500 characters of
dates 6.5 ms, 300 of them 2.6 ms, 500 spaces 40 ms; 300 characters of nothing but numeric
dates, the worst found, 13 ms), while REALTALK's longest question has 160 characters (99th
percentile 118): dates past that are a pasted page's.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import parsedatetime

from src.recall.named_periods import YEAR_NUM, add_months, holidays, seasons, weekends

log = logging.getLogger(__name__)

#: Characters of a question read.
MAX_CHARS = 300
#: Vague counts the parser does not read, as the number people usually mean.
VAGUE_COUNTS = {"a few": "3", "few": "3", "a couple of": "2", "a couple": "2", "couple of": "2",
                "several": "4", "some": "3"}

_YEAR = re.compile(rf"\b(?:in|during|of|from|since|before|after|until|till|by)\s+(?:the\s+year\s+)?"
                   rf"({YEAR_NUM})\b(?![./:-]?\d)", re.I)
_VAGUE = re.compile(r"\b(a few|a couple of|a couple|several|some)(?=\s+(?:days|weeks|months|years)\s+ago\b)",
                    re.I)
_ROLLING = re.compile(r"\b(?:(?:the\s+)?past\s+(?:([a-z0-9-]+(?:\s+of)?)\s+)?(day|week|month|year)s?|"
                      r"(?:the\s+)?last\s+([a-z0-9-]+(?:\s+of)?)\s+(day|week|month|year)s)\b", re.I)
_QUOTED = re.compile(r'"[^"]*"|\u201c[^\u201d]*\u201d')
_BLANK = re.compile(r"[\s\x00-\x1f\x7f]+")
_ORDINAL_OF = re.compile(r"\b(\d{1,2}(?:st|nd|rd|th)?)\s+of(?=\s+[a-z])", re.I)
#: The parser's own modifiers, read here instead (see the module doc).
_MASK = re.compile(r"\b(?:before|after|prior to|prior|from)\b", re.I)
_NUMERIC_DATE = re.compile(r"\b(\d{1,2})([./-])\d{1,2}\2\d{2,4}\b")
_OPEN_HEAD = re.compile(r"\b(before|prior to|until|till|by|after|since|from)\s*(?:the\s+)?$", re.I)
_OPEN_START = re.compile(r"(before|prior to|until|till|by|after|since|from)\b", re.I)
_OPEN_INSIDE = re.compile(r"\b(before|prior to|after)\b", re.I)
_ENDS_AT_START, _ENDS_AT_END, _STARTS_AT_END = ("before", "prior to"), ("until", "till", "by"), ("after",)
_FORWARD = re.compile(r"\b(?:will|shall|gonna|going to|plan|plans|planning|planned|schedule|scheduled|"
                      r"upcoming|next|tomorrow|coming)\b|'ll\b", re.I)
_UNIT_END = re.compile(r"\b(?:second|minute|hour|day|week|fortnight|month|year)s?$")
_RELATIVE_UNIT = re.compile(r"\b(?:last|this|next)\s+(?:week|month|year)$")
_PART_OF_DAY = re.compile(r"^(?:(this|last)\s+(?:morning|afternoon|evening|night)|(tonight))$")
_DAY_WORD = re.compile(r"\b(?:this|last|tonight|today|yesterday|tomorrow)\b")
_NAME_CUE = re.compile(r"\b(?:in|on|during|since|before|after|until|till|of|from|last|this|next|early|"
                       r"late|mid|end of|start of|beginning of|through|throughout)\s*-?\s*$", re.I)
_NAME_START = re.compile(r"(?:on|in|last|this|next|since|until|end|start|beginning|middle)\b", re.I)
_CTX = parsedatetime.pdtContext
_DATE_BITS = _CTX.ACU_YEAR | _CTX.ACU_MONTH | _CTX.ACU_WEEK | _CTX.ACU_DAY

_WHEN_AUX = r"(?:did|do|does|was|were|is|are|am|will|would|have|has|had|can|could|should|shall)"
_WHEN_START = re.compile(
    r"^\W*(?:(?:and|so|but|then|ok|okay|also|hey|remind me|tell me|do you (?:know|remember)|"
    r"can you (?:tell me|remind me))[\s,]+)?"
    r"(?:since when|until when|how long ago|how long has it been since|how long since|"
    r"how many (?:days|weeks|months|years) ago|what(?:'s| is| was) the date|"
    r"(?:(?:on|in|at|during|by)\s+)?(?:what|which)\s+(?:date|day|year|month|week|time)(?!\s+is\s+it\b))\b",
    re.I)
_WHEN_WORD = re.compile(r"^\W*(?:(?:and|so|but|then|also)[\s,]+)?when\s+(\S+)", re.I)
_WHEN_INSIDE = re.compile(rf"(?:[,;:]|\band\b|\bor\b)\s*when\s+{_WHEN_AUX}\b|"
                          r"\b(?:remember|recall|know|tell me|remind me)\s+when\b", re.I)
_MAIN_QUESTION = re.compile(rf",\s*((?:what|where|who|whom|which|how|why|{_WHEN_AUX}|when)\b.*)$", re.I | re.S)
_BEFORE_CUES = re.compile(r"\bused to\b|(?:^\W*|\b(?:what|where|who|which|how|when|why)\s+)did(?:n't| not)?\s+\w+(?:\s+\w+)?\s+"
                          r"use to\b|\b(?:previously|previous|originally|"
                          r"formerly|at first|at the start|in the past|back then|back in the day|anymore|any more|"
                          r"no longer|(?:my|our|his|her|their|your) (?:old|former)\b)", re.I)
_BEFORE = re.compile(r"\bbefore\b", re.I)
_PAST = re.compile(r"\b(?:did|was|were|had|used|went)\b|\b[a-z]{2,}ed\b", re.I)
#: Any instant: whether a date follows "before" does not depend on when the question is asked.
_ANY_NOW = datetime(2000, 1, 1, tzinfo=UTC)

_local = threading.local()     # a Calendar keeps a context stack while it parses: one a thread


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
        return _question_time(_clean(text), _utc(now))
    except Exception as exc:     # a parser's error must not cost a recall
        log.debug("no time read from a question: %r", exc)
        return None


def asks_when(text: str) -> bool:
    """Whether the question asks when something happened ("When did I move to Leeds?")."""
    try:
        return _asks_when(_clean(text).replace("\u2019", "'"))
    except Exception as exc:
        log.debug("asks_when failed: %r", exc)
        return False


def asks_before(text: str) -> bool:
    """Whether the question asks about an earlier state, not the current one.

    "before" counts in a question put in the past ("Where did she live before?", "What was my
    salary before the raise?"), not in one about a routine ("What do I take before bed?"), and
    not before a date ("What did I watch before 7 Jan 2024?"): that is a period, read by
    `question_time`, whose newest statement is the answer.
    """
    try:
        text = _clean(text).replace("\u2019", "'")
        if _BEFORE_CUES.search(text):
            return True
        if not _BEFORE.search(text) or not _PAST.search(text):
            return False
        frame = question_time(text, _ANY_NOW)
        return frame is None or frame.start is not None
    except Exception as exc:
        log.debug("asks_before failed: %r", exc)
        return False


def _asks_when(text: str) -> bool:
    if _WHEN_START.search(text) or _WHEN_INSIDE.search(text):
        return True
    word = _WHEN_WORD.search(text)
    if word is None:
        return False
    if re.fullmatch(_WHEN_AUX, word.group(1), re.I):
        return True
    # "When I was young, what did I play?": a clause; the question is what follows it
    main = _MAIN_QUESTION.search(text, word.end())
    return True if main is None else _asks_when(main.group(1))


def _clean(text: object) -> str:
    """The first `MAX_CHARS` characters, each run of spaces or control characters one space
    (the parser is slowest on long runs of spaces: module doc)."""
    return _BLANK.sub(" ", str(text)[:MAX_CHARS])


def _question_time(text: str, now: datetime) -> TimeFrame | None:
    # every rewrite keeps the length, so a position in `scan` is one in `text`
    scan = text.replace("\u2019", "'")
    scan = _QUOTED.sub(lambda m: "_" * len(m.group()), scan)    # not spaces: see _clean
    scan = _ORDINAL_OF.sub(lambda m: m.group(1) + " " * (len(m.group()) - len(m.group(1))), scan)
    vague: list[tuple[int, int]] = []
    for m in _VAGUE.finditer(scan):
        vague.append(m.span())
    scan = _VAGUE.sub(lambda m: VAGUE_COUNTS[m.group(1).lower()].ljust(len(m.group())), scan)
    lower = scan.lower()
    forward = _FORWARD.search(lower) is not None

    found: list[tuple[int, int, datetime, datetime, bool]] = []   # start, end, from, to, may open
    found += holidays(lower, now)
    found += seasons(lower, now, forward)
    found += weekends(lower, now, forward)
    found += _rolling(scan, now)
    for m in _YEAR.finditer(scan):
        first = datetime(int(m.group(1)), 1, 1, tzinfo=UTC)
        found.append((m.start(), m.end(), first, first.replace(year=first.year + 1), True))
    masked, parsed = _parse(scan, now)
    for at, ctx, start, end, phrase in parsed:
        if masked[start:end] != phrase or any(start < e and s < end for s, e, *_ in found):
            continue                    # the indices are the parser's: trust them only when they fit
        start += len(phrase) - len(phrase.lstrip())
        is_vague = any(start < e and s < end for s, e in vague)
        period = _period(at.replace(tzinfo=UTC), ctx.accuracy, scan, start, end, now, forward, is_vague)
        if period is not None:
            found.append((start, end, *period, True))
    if not found:
        return None
    start, end, first, after, may_open = min(found, key=lambda f: (f[0], -f[1]))
    return _opened(text, lower, start, end, first, after) if may_open else \
        TimeFrame(first, after, text[start:end].strip())


def _parse(scan: str, now: datetime) -> tuple[str, tuple]:
    """The text the parser read (before/after hidden) and its finds: (when, context, start,
    end, phrase) each."""
    masked = _MASK.sub(lambda m: " " * len(m.group()), scan)
    numeric = _NUMERIC_DATE.search(masked)
    day_first = numeric is not None and (numeric.group(2) != "/" or int(numeric.group(1)) > 12)
    return masked, _calendar(day_first).nlp(masked, sourceTime=now.replace(tzinfo=None)) or ()


def _calendar(day_first: bool) -> parsedatetime.Calendar:
    key = "day_first" if day_first else "month_first"
    cal = getattr(_local, key, None)
    if cal is None:
        locale = "en_AU" if day_first else "en_US"    # the same English names, the day first
        cal = parsedatetime.Calendar(parsedatetime.Constants(locale),
                                     version=parsedatetime.VERSION_CONTEXT_STYLE)
        setattr(_local, key, cal)
    return cal


def _period(at: datetime, acc: int, scan: str, start: int, end: int, now: datetime, forward: bool,
            vague: bool) -> tuple[datetime, datetime] | None:
    """The period of one parsed phrase, by how exact the parser says it is; None for a false find."""
    said = " ".join(scan[start:end].lower().split())
    if not acc or not re.search(r"[a-z]|\d\D+\d", said):
        return None                     # a bare number: a code, a count
    if not acc & _DATE_BITS:
        if not _DAY_WORD.search(said):
            return None                 # a time of day alone: "a morning walk", "at 5pm"
        acc = _CTX.ACU_DAY
    if _UNIT_END.search(said) and not _RELATIVE_UNIT.search(said):
        return None                     # a duration: "for 3 days", "once a month"
    if not re.search(r"\d", said) and not _DAY_WORD.search(said) and "ago" not in said \
            and not _RELATIVE_UNIT.search(said) and not _named(scan, start):
        return None                     # "May I ask", "I may go"
    keep_ahead = forward or acc & _CTX.ACU_YEAR or re.search(r"\b(?:next|tomorrow)\b", said)
    if part := _PART_OF_DAY.match(said):
        at = now - timedelta(days=1) if part.group(1) == "last" else now
    day = at.replace(hour=0, minute=0, second=0, microsecond=0)
    if acc & _CTX.ACU_DAY:
        while day > now and not keep_ahead:
            day = _year_back(day) if acc & _CTX.ACU_MONTH else day - timedelta(days=7)
        if vague:
            return day - timedelta(days=1), day + timedelta(days=2)
        return day, day + timedelta(days=1)
    if acc & _CTX.ACU_WEEK:
        monday = day - timedelta(days=day.weekday())
        if vague:
            return monday - timedelta(days=7), monday + timedelta(days=14)
        return monday, monday + timedelta(days=7)
    if acc & _CTX.ACU_MONTH:
        first = day.replace(day=1)
        while first > now and not keep_ahead:
            first = first.replace(year=first.year - 1)
        if vague:
            return add_months(first, -1), add_months(first, 2)
        return first, add_months(first, 1)
    if "ago" in said:                   # "two years ago": about then, a year wide
        return at - timedelta(days=183), at + timedelta(days=183)
    first = day.replace(month=1, day=1)
    return first, first.replace(year=first.year + 1)


def _named(scan: str, start: int) -> bool:
    """Whether a bare month or weekday name is used as one: after a preposition (the parser's
    phrase may begin with it), or capitalised inside a sentence ("What did I eat Tuesday?")."""
    if _NAME_CUE.search(scan[:start]) or _NAME_START.match(scan, start):
        return True
    return scan[start].isupper() and re.search(r"[^\s.!?]\s*$", scan[:start]) is not None


def _rolling(scan: str, now: datetime) -> list[tuple[int, int, datetime, datetime, bool]]:
    """"the past week", "the last three days": from that far back to the end of today."""
    out = []
    tomorrow = now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    for m in _ROLLING.finditer(scan):
        count, unit = (m.group(1), m.group(2)) if m.group(2) else (m.group(3), m.group(4))
        count = VAGUE_COUNTS.get((count or "1").lower(), count or "1")
        back = _calendar(False).nlp(f"{count} {unit}s ago", sourceTime=now.replace(tzinfo=None))
        if back and back[0][1].accuracy:
            first = back[0][0].replace(hour=0, minute=0, second=0, microsecond=0, tzinfo=UTC)
            out.append((m.start(), m.end(), first, tomorrow, False))
    return out


def _opened(text: str, lower: str, start: int, end: int, first: datetime, after: datetime) -> TimeFrame:
    """"before X" ends where X starts, "after X" starts where it ends, and so on (module doc)."""
    head = _OPEN_HEAD.search(lower[:start])
    inside = _OPEN_START.match(lower, start) or _OPEN_INSIDE.search(lower[start:end])
    if head is not None:
        word, start = head.group(1), head.start()
    elif inside is not None:            # "before 2024", "on Friday before 10.01.2024"
        word = inside.group(1)
    else:
        return TimeFrame(first, after, text[start:end].strip())
    phrase = text[start:end].strip()
    if word in _ENDS_AT_START:
        return TimeFrame(None, first, phrase)
    if word in _ENDS_AT_END:
        return TimeFrame(None, after, phrase)
    if word in _STARTS_AT_END:
        return TimeFrame(after, None, phrase)
    return TimeFrame(first, None, phrase)


def _year_back(day: datetime) -> datetime:
    return day.replace(year=day.year - 1, day=min(day.day, 28) if day.month == 2 else day.day)


def _utc(at: datetime) -> datetime:
    return at.astimezone(UTC) if at.tzinfo is not None else at.replace(tzinfo=UTC)
