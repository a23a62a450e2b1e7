"""The time a question names (src/recall/timeframe.py), relative to a fixed now."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from src.recall.timeframe import MAX_CHARS, TimeFrame, asks_before, asks_when, question_time

NOW = datetime(2026, 11, 28, 16, 0, tzinfo=UTC)     # a Saturday


def d(y: int, m: int, day: int, hour: int = 0) -> datetime:
    return datetime(y, m, day, hour, tzinfo=UTC)


@pytest.mark.parametrize(("question", "start", "end"), [
    # a day
    ("What did I do yesterday?", d(2026, 11, 27), d(2026, 11, 28)),
    ("What did I do today?", d(2026, 11, 28), d(2026, 11, 29)),
    ("What did I do this morning?", d(2026, 11, 28), d(2026, 11, 29)),
    ("What did I eat last night?", d(2026, 11, 27), d(2026, 11, 28)),
    ("What did I eat on Tuesday?", d(2026, 11, 24), d(2026, 11, 25)),        # the last Tuesday
    ("What did I eat Tuesday?", d(2026, 11, 24), d(2026, 11, 25)),
    ("What did I eat last Tuesday?", d(2026, 11, 24), d(2026, 11, 25)),
    ("What did I do on Saturday?", d(2026, 11, 28), d(2026, 11, 29)),        # today is one
    ("what did I do three days ago", d(2026, 11, 25), d(2026, 11, 26)),
    ("Where was I on 5 January 2024?", d(2024, 1, 5), d(2024, 1, 6)),
    ("What happened on the 17th of January, 2024?", d(2024, 1, 17), d(2024, 1, 18)),
    ("What did I do on 5 December?", d(2025, 12, 5), d(2025, 12, 6)),       # the last one
    ("What will I do on 5 December?", d(2026, 12, 5), d(2026, 12, 6)),      # looks ahead
    ("What's my plan for Monday?", d(2026, 11, 30), d(2026, 12, 1)),
    ("What is on for tomorrow?", d(2026, 11, 29), d(2026, 11, 30)),
    # numeric dates: dots and dashes day first, slashes month first unless the day shows
    ("What did I do on 14.01.2024?", d(2024, 1, 14), d(2024, 1, 15)),
    ("What did I do on 10.01.2024?", d(2024, 1, 10), d(2024, 1, 11)),
    ("What did I do on 10/01/2024?", d(2024, 10, 1), d(2024, 10, 2)),
    ("What did I do on 14/01/2024?", d(2024, 1, 14), d(2024, 1, 15)),
    ("What did I do on 2024-01-05?", d(2024, 1, 5), d(2024, 1, 6)),
    ("Which meeting did I have in the evening on 25.01.2024?", d(2024, 1, 25), d(2024, 1, 26)),
    # a week, a weekend
    ("What did I do last week?", d(2026, 11, 16), d(2026, 11, 23)),        # Monday to Sunday
    ("What have I done this week?", d(2026, 11, 23), d(2026, 11, 30)),
    ("What am I doing next week?", d(2026, 11, 30), d(2026, 12, 7)),
    ("What happened 3 weeks ago?", d(2026, 11, 2), d(2026, 11, 9)),
    ("What did I do last weekend?", d(2026, 11, 21), d(2026, 11, 23)),
    ("What did I do at the weekend?", d(2026, 11, 28), d(2026, 11, 30)),
    # a month
    ("What happened last month?", d(2026, 10, 1), d(2026, 11, 1)),
    ("What happened this month?", d(2026, 11, 1), d(2026, 12, 1)),
    ("What happened in May?", d(2026, 5, 1), d(2026, 6, 1)),                 # the last May, not the next
    ("What happened in November?", d(2026, 11, 1), d(2026, 12, 1)),
    ("What happened in December?", d(2025, 12, 1), d(2026, 1, 1)),
    ("what did we do at the end of May", d(2026, 5, 1), d(2026, 6, 1)),
    ("What did I do a month ago?", d(2026, 10, 1), d(2026, 11, 1)),
    ("What did I do at the end of last month?", d(2026, 10, 1), d(2026, 11, 1)),
    ("Where did I hike in January 2024?", d(2024, 1, 1), d(2024, 2, 1)),
    # a year
    ("What did I do in 2023?", d(2023, 1, 1), d(2024, 1, 1)),
    ("What did I do last year?", d(2025, 1, 1), d(2026, 1, 1)),
    # seasons, three months each (the northern hemisphere's)
    ("Where do I go during spring break of 2024?", d(2024, 3, 1), d(2024, 6, 1)),
    ("What did I do last summer?", d(2026, 6, 1), d(2026, 9, 1)),              # the latest over
    ("What did I do in the summer?", d(2026, 6, 1), d(2026, 9, 1)),
    ("What did I do in the fall?", d(2026, 9, 1), d(2026, 12, 1)),              # under way
    ("What did we do last winter?", d(2025, 12, 1), d(2026, 3, 1)),             # by its December
    ("Where am I going next summer?", d(2027, 6, 1), d(2027, 9, 1)),
    ("Which long walk is planned this summer?", d(2027, 6, 1), d(2027, 9, 1)),  # looks ahead
    ("Where was I in summer 2023?", d(2023, 6, 1), d(2023, 9, 1)),
    ("Which country did I visit in winter 2021 - 2022?", d(2021, 12, 1), d(2022, 3, 1)),
    ("What did I do before last summer?", None, d(2026, 6, 1)),
    # vague counts, one unit either side
    ("What did I do a few days ago?", d(2026, 11, 24), d(2026, 11, 27)),
    ("What did I read a couple of weeks ago?", d(2026, 11, 2), d(2026, 11, 23)),
    # up to now
    ("What did I do in the past week?", d(2026, 11, 21), d(2026, 11, 29)),
    ("What did I read over the last three days?", d(2026, 11, 25), d(2026, 11, 29)),
    ("What did I read the past few months?", d(2026, 8, 28), d(2026, 11, 29)),
    # holidays
    ("What did we do at Christmas?", d(2025, 12, 24), d(2025, 12, 27)),      # the last one
    ("What did we do at Christmas 2023?", d(2023, 12, 24), d(2023, 12, 27)),
    ("What did I do on New Year's Eve?", d(2025, 12, 31), d(2026, 1, 1)),
    ("Where are we celebrating New Year 2025?", d(2024, 12, 31), d(2025, 1, 2)),
    ("When did she arrive for the 2024 New Year's party?", d(2023, 12, 31), d(2024, 1, 2)),
    # open sides
    ("What happened before 5 January 2024?", None, d(2024, 1, 5)),
    ("What happened after 5 January 2024?", d(2024, 1, 6), None),
    ("What have I done since March?", d(2026, 3, 1), None),
    ("What did I do until March 2024?", None, d(2024, 4, 1)),
    ("What had I finished by May?", None, d(2026, 6, 1)),
    ("What happened before 2024?", None, d(2024, 1, 1)),
    ("What did I do from 2019 on?", d(2019, 1, 1), None),
    ("What did I buy before Christmas?", None, d(2025, 12, 24)),
    ("What did she bake on Friday before 10.01.2024?", None, d(2024, 1, 10)),
])
def test_the_period_a_question_names(question, start, end):
    frame = question_time(question, NOW)
    assert frame is not None and (frame.start, frame.end) == (start, end)


def test_years_ago_is_a_year_wide_centred_there():
    frame = question_time("What did I do two years ago?", NOW)
    assert (frame.start, frame.end) == (d(2024, 5, 29, 16), d(2025, 5, 30, 16))
    vague = question_time("a few years ago, where did I live?", NOW)     # read as three
    assert (vague.start, vague.end) == (d(2023, 5, 29, 16), d(2024, 5, 29, 16))


@pytest.mark.parametrize(("question", "phrase"), [
    ("What happened before 5 January 2024?", "before 5 January 2024"),
    ("In which country did I ski a few years ago?", "a few years ago"),
    ("What did I do in 2023?", "in 2023"),
    ("What did we do at Christmas?", "Christmas"),
    ("What did I eat on Tuesday?", "on Tuesday"),
    ("What did I do on 14.01.2024?", "on 14.01.2024"),
    ("What did I do in the past week?", "the past week"),
])
def test_the_phrase_is_the_questions_own_words(question, phrase):
    assert question_time(question, NOW).phrase == phrase


@pytest.mark.parametrize("question", [
    "What is my job?", "Where do I live now?", "Where do I live these days?", "What time is it?",
    "My gym locker code is 7419.", "I have 3 kids", "Where do the 3 kids go to school?",
    "What is the 3rd item?", "what about the 5 kids at 10?", "My PIN is 1234 and my flat is 12B",
    "Call me on 555 1234", "Did I pay 2000 dollars for it?",
    # durations, frequencies and times of day are no period
    "How many days a week do I run?", "Who do I meet once a month?", "I was sick for 3 days",
    "When was the last day of school?", "When did I take a morning walk?", "What happened at 5pm?",
    "What do I eat for lunch?",
    # words that are also month or weekday names
    "May I ask what my job is?", "I may go to the gym", "Did you march in the parade?", "We sat in the sun",
    "Did I fall off my bike?", "Did I buy spring onions?", "What winter coat did I buy?",
    # titles, events, other languages, rubbish
    'When did I start reading "11/22/63"?', "What is the op 118 no. 2 like?",
    "Where did I live before I moved?", "Did it snow before the time she knew Vanessa?",
    "What do I take before bed?", "Was ist mein Beruf?", "Où est-ce que j'habite?", "我住在哪里？",
    "", "   ", "\x00\x01\x1b[2J", "?" * 600, "x" * 1_000_000,
])
def test_no_period_where_none_is_named(question):
    assert question_time(question, NOW) is None


def test_only_the_first_max_chars_are_read():
    assert question_time("x" * MAX_CHARS + " yesterday", NOW) is None
    assert question_time("yesterday " + "x" * 1_000_000, NOW).start == d(2026, 11, 27)


def test_now_in_another_zone_or_naive_is_read_as_the_same_instant():
    east = NOW.astimezone(timezone(timedelta(hours=10)))        # already Sunday there
    assert question_time("What did I do yesterday?", east).start == d(2026, 11, 27)
    assert question_time("What did I do yesterday?", NOW.replace(tzinfo=None)).start == d(2026, 11, 27)


def test_holds_is_start_inclusive_end_exclusive_and_open_sides_hold():
    frame = TimeFrame(d(2026, 1, 1), d(2026, 2, 1), "January")
    assert frame.holds(d(2026, 1, 1)) and not frame.holds(d(2026, 2, 1))
    assert frame.holds(datetime(2026, 1, 31, 23, 59))                     # naive: UTC
    assert frame.holds(datetime(2026, 2, 1, 9, tzinfo=timezone(timedelta(hours=10))))   # 23:00 UTC: January
    assert TimeFrame(None, d(2026, 2, 1), "").holds(d(1990, 1, 1))
    assert TimeFrame(d(2026, 2, 1), None, "").holds(d(2090, 1, 1))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=700), st.datetimes(min_value=datetime(1901, 1, 1), max_value=datetime(2199, 1, 1)))
def test_never_raises(text, now):
    frame = question_time(text, now.replace(tzinfo=UTC))
    assert frame is None or isinstance(frame, TimeFrame)
    assert asks_when(text) in (True, False) and asks_before(text) in (True, False)


@pytest.mark.parametrize("bad", [None, 12, b"yesterday", object()])
def test_never_raises_on_what_is_not_text(bad):
    assert question_time(bad, NOW) is None or isinstance(question_time(bad, NOW), TimeFrame)
    assert asks_when(bad) in (True, False) and asks_before(bad) in (True, False)


@pytest.mark.parametrize(("question", "when"), [
    ("When did I move to Leeds?", True), ("when was my last dentist appointment", True),
    ("What date is my flight?", True), ("How long ago did I quit smoking?", True),
    ("Since when have I lived here?", True), ("What year did we meet?", True),
    ("In what month were we both sick?", True), ("At what time did I wake up?", True),
    ("How long has it been since I had a nosebleed?", True),
    ("When Vanessa had a day off?", True),                       # REALTALK's word order
    ("And when did we meet?", True), ("Tell me, when did I start?", True),
    ("Where and when did we meet?", True), ("Do you remember when I moved?", True),
    ("When I was young, when did I break my arm?", True),
    ("What is my job?", False), ("Where do I live?", False), ("What did I do when it rained?", False),
    ("When I was young, what did I want to be?", False),
    ("When we lived in Leeds, where did I work?", False),
    ("What time is it?", False), ("What day is it?", False), ("How long did the trip take?", False),
])
def test_asks_when(question, when):
    assert asks_when(question) is when


@pytest.mark.parametrize(("question", "before"), [
    ("Where did my sister live before?", True), ("What was my salary before the raise?", True),
    ("Which app did I use for notes previously?", True), ("What car did I used to drive?", True),
    ("Where did my sister use to live?", True), ("Didn't I use to live in Leeds?", True),
    ("What was my job originally?", True), ("What did I think of it at first?", True),
    ("Who was my old manager?", True), ("Who is my former landlord?", True),
    ("Where did I live before I moved to Leeds?", True), ("Where don't I work anymore?", True),
    ("What is my salary?", False), ("Where does my sister live?", False),
    # a routine, not a look back (the question is in the present)
    ("before I go to bed what do I take?", False), ("What does he do before bed?", False),
    ("What is my salary before tax?", False),
    # before a date: a period, read by question_time
    ("What did I watch before 7 Jan 2024?", False), ("What did I buy before Christmas?", False),
    ("What do I do for a living?", False), ("What device did she use to check the shelves?", False),
    ("When was the last time I saw my dentist?", False),
])
def test_asks_before(question, before):
    assert asks_before(question) is before
