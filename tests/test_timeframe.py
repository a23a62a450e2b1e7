"""The time a question names (src/recall/timeframe.py), relative to a fixed now."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from src.recall.timeframe import TimeFrame, asks_before, asks_when, question_time

NOW = datetime(2026, 11, 28, 16, 0, tzinfo=UTC)     # a Saturday


def d(y: int, m: int, day: int) -> datetime:
    return datetime(y, m, day, tzinfo=UTC)


@pytest.mark.parametrize(("question", "start", "end"), [
    ("What did I do yesterday?", d(2026, 11, 27), d(2026, 11, 28)),
    ("What did I do last week?", d(2026, 11, 16), d(2026, 11, 23)),        # Monday to Sunday
    ("What have I done this week?", d(2026, 11, 23), d(2026, 11, 30)),
    ("What happened last month?", d(2026, 10, 1), d(2026, 11, 1)),
    ("What happened in May?", d(2026, 5, 1), d(2026, 6, 1)),                 # the last May, not the next
    ("What did I eat on Tuesday?", d(2026, 11, 24), d(2026, 11, 25)),        # the last Tuesday
    ("what did I do three days ago", d(2026, 11, 25), d(2026, 11, 26)),
    ("What did I do in 2023?", d(2023, 1, 1), d(2024, 1, 1)),
    ("Where was I on 5 January 2024?", d(2024, 1, 5), d(2024, 1, 6)),
    ("What did we do at Christmas?", d(2025, 12, 24), d(2025, 12, 27)),      # the last one
    ("What happened before 5 January 2024?", None, d(2024, 1, 5)),
    ("What happened after 5 January 2024?", d(2024, 1, 6), None),
    ("What have I done since March?", d(2026, 3, 1), None),
])
def test_the_period_a_question_names(question, start, end):
    frame = question_time(question, NOW)
    assert frame is not None and (frame.start, frame.end) == (start, end)


def test_years_ago_is_a_year_wide_about_then():
    frame = question_time("What did I do two years ago?", NOW)
    assert frame.holds(d(2024, 11, 28)) and frame.holds(d(2024, 6, 1)) and not frame.holds(d(2023, 11, 1))
    vague = question_time("a few years ago, where did I live?", NOW)
    assert vague.holds(d(2023, 11, 28)) and not vague.holds(d(2026, 1, 1))


@pytest.mark.parametrize("question", [
    "What is my job?", "Where do I live now?", "What time is it?", "My gym locker code is 7419.",
    "I have 3 kids", "What is the 3rd item?", "what about the 5 kids at 10?", "", "\x00\x01\x1b[2J",
    "Was ist mein Beruf?", "x" * 1_000_000,
])
def test_no_period_where_none_is_named(question):
    assert question_time(question, NOW) is None


def test_holds_is_start_inclusive_end_exclusive_and_open_sides_hold():
    frame = TimeFrame(d(2026, 1, 1), d(2026, 2, 1), "January")
    assert frame.holds(d(2026, 1, 1)) and not frame.holds(d(2026, 2, 1))
    assert TimeFrame(None, d(2026, 2, 1), "").holds(d(1990, 1, 1))
    assert TimeFrame(d(2026, 2, 1), None, "").holds(d(2090, 1, 1))


@pytest.mark.parametrize(("question", "when"), [
    ("When did I move to Leeds?", True), ("when was my last dentist appointment", True),
    ("What date is my flight?", True), ("How long ago did I quit smoking?", True),
    ("Since when have I lived here?", True), ("What year did we meet?", True),
    ("What is my job?", False), ("Where do I live?", False), ("What did I do when it rained?", False),
])
def test_asks_when(question, when):
    assert asks_when(question) is when


@pytest.mark.parametrize(("question", "before"), [
    ("Where did my sister live before?", True), ("What was my salary before the raise?", True),
    ("Which app did I use for notes previously?", True), ("What car did I used to drive?", True),
    ("What was my job originally?", True), ("Who was my old manager?", True),
    ("Who is my former landlord?", True),
    ("What is my salary?", False), ("Where does my sister live?", False),
    ("before I go to bed what do I take?", False), ("What do I do for a living?", False),
])
def test_asks_before(question, before):
    assert asks_before(question) is before
