"""Periods a question names that the date parser does not know (src/recall/timeframe.py).

- Holidays with a fixed date (`HOLIDAYS`): "at Christmas" is 24-26 December; New Year is the
  night it spans (31 December and 1 January). Without a year, the last one begun by now.
- Seasons (`SEASONS`): three months each, as the northern hemisphere's weather counts them
  ("last summer": June to August; a winter is named by the year its December falls in,
  "winter 2021 - 2022"). "last summer" is the latest one over by now, "next summer" the first
  to begin after now, "this summer" or "in the summer" the one under way or the latest begun
  (the next one in a question that looks ahead: "Which walk is planned this summer?"). A
  season word counts only qualified ("this fall"), with a year ("spring of 2024", "spring
  break of 2024") or after a preposition ("in the spring"): "Did I fall off my bike?" and
  "spring onions" name no period. A southern-hemisphere user's summer is read as winter.
- Weekends, Saturday and Sunday ("last weekend"; "at the weekend" on a weekday asking about
  the past: the one before).

Each finder gives (start, end, from, to, may open) per find: the find's span in the lowered
question, the period (UTC, end exclusive), and whether "before"/"after" around it may open
one side (src/recall/timeframe.py `_opened`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

#: A year as people write one.
YEAR_NUM = r"(?:19|20)\d{2}"
#: Holidays with a fixed date, as patterns: (month, day, first day's offset from it, days).
HOLIDAYS: dict[str, tuple[int, int, int, int]] = {
    r"christmas eve": (12, 24, 0, 1),
    r"christmas day": (12, 25, 0, 1),
    r"boxing day": (12, 26, 0, 1),
    r"christmas|xmas": (12, 25, -1, 3),
    r"new years? eve|new year's eve": (12, 31, 0, 1),
    r"new years? day|new year's day": (1, 1, 0, 1),
    r"new years?|new year's": (1, 1, -1, 2),
    r"halloween": (10, 31, 0, 1),
    r"valentines? day|valentine's day": (2, 14, 0, 1),
    r"st\.? patrick's day|st\.? patricks day": (3, 17, 0, 1),
}
#: Seasons, by the first of their three months (the northern hemisphere's, by the weather).
SEASONS: dict[str, int] = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
_HOLIDAY = re.compile(rf"(?:\b({YEAR_NUM})\s+)?\b({'|'.join(HOLIDAYS)})\b(?:\s+({YEAR_NUM})\b)?", re.I)
_HOLIDAY_KEYS = [(re.compile(key, re.I), spec) for key, spec in HOLIDAYS.items()]
_SEASON = re.compile(rf"\b(?:(this|last|next|past)\s+)?({'|'.join(SEASONS)})"
                     r"(?:\s+(?:break|holidays?|vacation|term|semester))?"
                     rf"(?:,?\s+(?:of\s+)?({YEAR_NUM})\b(?:\s*[-/\u2013]\s*(?:{YEAR_NUM}|\d{{2}})\b)?)?", re.I)
_SEASON_CUE = re.compile(r"\b(?:in|during|over|through|throughout|since|until|till|by|before|after|from|"
                         r"early|late|mid|of|all)\s+(?:the\s+)?-?$", re.I)
_WEEKEND = re.compile(r"\b(last|past|this|next|the)\s+weekend\b", re.I)


def holidays(lower: str, now: datetime) -> list[tuple[int, int, datetime, datetime, bool]]:
    out = []
    for m in _HOLIDAY.finditer(lower):
        month, day, offset, days = next(spec for key, spec in _HOLIDAY_KEYS if key.fullmatch(m.group(2)))
        year = m.group(1) or m.group(3)
        anchor = datetime(int(year) if year else now.year, month, day, tzinfo=UTC)
        first = anchor + timedelta(days=offset)
        if not year and first > now:
            first = first.replace(year=first.year - 1)
        out.append((m.start(), m.end(), first, first + timedelta(days=days), True))
    return out


def seasons(lower: str, now: datetime, forward: bool) -> list[tuple[int, int, datetime, datetime, bool]]:
    out = []
    for m in _SEASON.finditer(lower):
        which, month, year = m.group(1), SEASONS[m.group(2)], m.group(3)
        if not which and not year and not _SEASON_CUE.search(lower[:m.start()]):
            continue                    # "Did I fall?", "spring onions"
        if year:
            first = datetime(int(year), month, 1, tzinfo=UTC)
        else:
            begun = [datetime(y, month, 1, tzinfo=UTC) for y in range(now.year - 2, now.year + 2)]
            if which in ("last", "past"):
                first = max(b for b in begun if add_months(b, 3) <= now)
            elif which == "next" or forward:
                first = min(b for b in begun if (b > now if which == "next" else add_months(b, 3) > now))
            else:
                first = max(b for b in begun if b <= now)
        out.append((m.start(), m.end(), first, add_months(first, 3), True))
    return out


def weekends(lower: str, now: datetime, forward: bool) -> list[tuple[int, int, datetime, datetime, bool]]:
    out = []
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    saturday = today - timedelta(days=today.weekday()) + timedelta(days=5)   # this week's
    for m in _WEEKEND.finditer(lower):
        which = m.group(1)
        if which in ("last", "past"):
            first = saturday - timedelta(days=7)
        elif which == "next":
            first = saturday + timedelta(days=7)
        elif which == "the" and not forward and saturday > now:
            first = saturday - timedelta(days=7)    # "what did I do at the weekend" on a Wednesday
        else:
            first = saturday
        out.append((m.start(), m.end(), first, first + timedelta(days=2), False))
    return out


def add_months(first: datetime, months: int) -> datetime:
    index = first.year * 12 + first.month - 1 + months
    return first.replace(year=index // 12, month=index % 12 + 1)
