"""The user's facts said back as the user's (issue 38 item 3): which sentences are turned to
the second person, and which are left alone."""

from __future__ import annotations

import pytest

from src.loop.speaker_check import going_on_as_user, said_as_users
from src.recall.speakers import to_second_person

USER_SAID = ["My favourite tea is lapsang souchong.", "Next month I'm going to walk the West Highland Way.",
             "I was born in Leeds."]


@pytest.mark.parametrize(("answer", "expected"), [
    ("My favourite tea is lapsang souchong.", "Your favourite tea is lapsang souchong."),
    ("Next month I'm going to walk the West Highland Way. I hope the weather holds!",
     "Next month you're going to walk the West Highland Way. I hope the weather holds!"),
    ("I was born in Leeds.", "You were born in Leeds."),
])
def test_a_restated_first_person_fact_becomes_the_users(answer, expected):
    assert said_as_users(answer, USER_SAID) == expected


@pytest.mark.parametrize("answer", [
    "I think you like lapsang souchong.",           # already says "you"
    "I remember that well.",                        # the mind about itself, in its own words
    "Your favourite tea is lapsang souchong.",      # second person already
    "I like green tea myself.",                     # shares too little
    "Glad I got the lapsang right.",                # one shared word restates nothing
    "I was not born in Leeds, I am a computer program.",   # denies the user's line: the mind of itself
])
def test_what_the_mind_says_of_itself_is_left_alone(answer):
    assert said_as_users(answer, USER_SAID) is None


def test_nothing_of_the_users_nothing_changes():
    assert said_as_users("My favourite tea is lapsang souchong.", []) is None


def test_second_person_keeps_the_rest_of_the_words():
    assert to_second_person("I was sure my mind was made up. Mine!") == "You were sure your mind was made up. Yours!"


RADIOGRAPHER = "I work as a veterinary radiographer at an animal hospital in Bristol."


@pytest.mark.parametrize(("answer", "statement", "expected"), [
    ("You are a veterinary radiographer at an animal hospital in Bristol. I work with animals. "
     "I am very experienced and have a good understanding of radiography.", RADIOGRAPHER,       # measured, 1.5B
     "You are a veterinary radiographer at an animal hospital in Bristol."),
    ("Your gym locker code is 7419. I am very excited to get in shape and improve my strength.",
     "My gym locker code is 7419.", "Your gym locker code is 7419."),
    ("Your gym locker code is 7419. I will keep it safe. Do you want me to remind you of it?",
     "My gym locker code is 7419.", "Your gym locker code is 7419. Do you want me to remind you of it?"),
    # to a question, after the user's recalled line said back (measured, 1.5B)
    ("You work as a veterinary radiographer at an animal hospital in Bristol. My job involves using X-rays to "
     "help diagnose animals.", RADIOGRAPHER, "You work as a veterinary radiographer at an animal hospital in Bristol."),
])
def test_a_reply_that_goes_on_as_the_user_is_cut_after_saying_it_back(answer, statement, expected):
    assert going_on_as_user(answer, [statement]) == expected


@pytest.mark.parametrize(("answer", "statement"), [
    ("I love lapsang souchong, it is a delicious tea.", "My favourite tea is lapsang souchong."),   # no saying back
    ("That sounds like hard work! How long have you been there?", RADIOGRAPHER),
    ("You are a radiographer. I see.", "The radiographer called."),             # not the user's first person
    ("You work at the hospital in Bristol, noted.", RADIOGRAPHER),              # nothing after it
])
def test_a_reply_that_does_not_go_on_as_the_user_is_left_alone(answer, statement):
    assert going_on_as_user(answer, [statement]) is None
