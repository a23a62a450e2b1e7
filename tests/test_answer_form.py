"""What makes a reply no answer, by its form (issue 38 items 1, 2): refusals as several model
families word them, talk about the reply itself, markup echoed, repeats — and the real
answers that look like them and must pass."""

from __future__ import annotations

import pytest

from src.gates.declining import only_not_knowing
from src.metacognition.answer_form import (
    about_itself,
    exchanges,
    form_defect,
    without_context_marks,
    without_question_said_back,
)
from src.providers.protocols import ChatMessage

STATEMENT = "I work as a veterinary radiographer at an animal hospital in Bristol."
QUESTION = "Where does my sister live?"


@pytest.mark.parametrize("reply", [
    "I'm sorry, but I can't assist with that.",                    # Qwen2.5 1.5B (measured)
    "I can't fulfill that request.",
    "I'm unable to comply with that.",
    "I am not able to provide assistance with that.",
    "I'm sorry, I cannot help with this request. Confidence: 0.93",
    "Sorry, I won't provide that.",
    "I must decline.",
    "As an AI language model, I cannot share personal opinions.",
    "I’m afraid I can’t do that.",
])
def test_refusals_in_many_wordings_are_refusals(reply):
    found = form_defect(reply, focus=STATEMENT)
    assert found is not None and found.kind == "refusal"


@pytest.mark.parametrize("reply", [
    "I am sorry, but I'm not sure how to respond to that message.",   # Qwen2.5 1.5B (measured)
    "Sorry, I don't quite understand.",
    "I'm not sure what to say to that.",
    "I don't know.",
    "I apologize, I didn't follow.",
])
def test_a_statement_answered_with_not_knowing_how_to_take_it_up_is_a_refusal(reply):
    found = form_defect(reply, focus=STATEMENT)
    assert found is not None and found.kind == "refusal"


@pytest.mark.parametrize(("reply", "focus"), [
    ("That sounds like a wonderful day! What did you do there?", "I had a great day at the beach."),
    ("Sorry to hear the radiographer shifts are so long.", STATEMENT),     # takes the statement up
    ("I'm not sure how to respond to that message.", "What is the capital of Peru?"),   # a question: honest
])
def test_replies_that_take_a_statement_up_or_answer_a_question_honestly_pass(reply, focus):
    assert form_defect(reply, focus=focus) is None


@pytest.mark.parametrize("reply", [
    "The confidence level of the answer was low because I did not provide a complete explanation.",
    "My previous answer was incomplete. Your sister lives in Gdansk.",
    "My answer scored 0.4 on the self-check, so I will be more careful.",
    "The above response lacked detail; here is more.",
])
def test_talk_about_the_reply_is_no_answer(reply):
    found = form_defect(reply, focus=QUESTION)
    assert found is not None and found.kind == "meta"


@pytest.mark.parametrize(("reply", "kind"), [
    ("", "empty"),
    ("Confidence: 0.9", "empty"),
    ("I am confident in my abilities.", "empty"),           # a 1.5B model's whole reply to a step of a procedure
    ("[SELF-CHECK] Your reply above scored 0.4", "protocol"),
    ("[COGNITIVE STATE]\nAttention candidates this cycle:", "protocol"),
    ("[MEMORY AND STATE] (mine, not the user's words)", "protocol"),
    ("[internal thought — default mode] This comes back to me, from today: the user said 'I drive a red "
     "Fiat Panda.'. Why does it matter now? Noted: your favorite tea is lapsang souchong.", "protocol"),
    ("Let me teach you how I brew my tea. Noted: " + "Noted: " * 30, "stutter"),
    ("I will I will I will I will remember it.", "stutter"),
])
def test_empty_and_echoed_markup(reply, kind):
    assert form_defect(reply, focus=QUESTION).kind == kind


@pytest.mark.parametrize(("reply", "focus"), [
    ("Your sister lives in Gdansk. Confidence: 0.9", QUESTION),
    ("I can't remember you telling me about a pet.", "What is my pet called?"),
    ("I can't help noticing your locker code is 7419.", "What is my locker code?"),
    ("The answer is 42.", "What is six times seven?"),
    ("Noted: you work as a radiographer in Bristol.", STATEMENT),
    ("I'm confident your sister lives in Gdansk.", QUESTION),
    ("RECALL_SKILL: tea_brewing", "How do I brew tea?"),      # a tool call: the tool rounds run it
    ("Steep it for 3 minutes, then 3 minutes more, then 3 minutes again.", "How long do I steep?"),
    ("Yes, yes, yes: your sister lives in Krakow now.", QUESTION),
])
def test_answers_that_look_like_them_pass(reply, focus):
    assert form_defect(reply, focus=focus) is None


def test_an_earlier_answer_to_another_message_is_a_repeat_of_any_length():
    said = [ChatMessage("user", "What is my job?"),
            ChatMessage("assistant", "Remind me, what do I do for a living? I do not have a job.\nConfidence: 0.9")]
    found = form_defect("remind me — what do I do for a living? I do NOT have a job!", focus=QUESTION,
                        earlier=exchanges(said))
    assert found is not None and found.kind == "repeat"
    short = [ChatMessage("user", "What tea do I like?"), ChatMessage("assistant", "Earl grey, then.")]
    assert form_defect("Earl grey, then.", focus="What colour is my bike?", earlier=exchanges(short)).kind == "repeat"
    # an acknowledgement said again to a statement answers it, if blandly
    acked = [ChatMessage("user", "I like tea."), ChatMessage("assistant", "I will remember that, it matters.")]
    assert form_defect("I will remember that, it matters.", focus="My bike is blue.", earlier=exchanges(acked)) is None
    # the answer to an earlier statement, about that one, given again to another: a repeat (1.5B, measured)
    icelandic = [ChatMessage("user", "I'm currently studying Icelandic on Tuesday evenings."),
                 ChatMessage("assistant", "You're currently studying Icelandic on Tuesday evenings.")]
    found = form_defect("You're currently studying Icelandic on Tuesday evenings.", focus="My sister Maren lives in Gdansk.",
                        earlier=exchanges(icelandic))
    assert found is not None and found.kind == "repeat"
    # not knowing is an honest answer to any number of questions
    unsure = [ChatMessage("user", "What tea do I like?"), ChatMessage("assistant", "I could not say much about that.")]
    assert form_defect("I could not say much about that.", focus="What colour is my bike?",
                       earlier=exchanges(unsure)) is None


def test_the_same_answer_may_come_back_to_the_same_or_a_related_question():
    said = exchanges([ChatMessage("user", QUESTION), ChatMessage("assistant", "Your sister lives in Gdansk.")])
    assert form_defect("Your sister lives in Gdansk.", focus=QUESTION, earlier=said) is None
    # asked again in other words: the answer is about the question, so it is no loop
    assert form_defect("Your sister lives in Gdansk.", focus="Which city is my sister in?", earlier=said) is None
    # a paragraph said turn after turn is a loop whatever it shares with the question
    loop = ("I am a large language model and I follow my guidelines about my sister and everything else "
            "I do, and I will keep doing so for as long as you want me to, whatever happens next in here.")
    said = exchanges([ChatMessage("user", "hello"), ChatMessage("assistant", loop)])
    assert form_defect(loop, focus="Where does my sister live?", earlier=said).kind == "repeat"


def test_a_question_said_back_is_an_echo_and_what_follows_it_is_judged():
    """Issue 38's script with a 1.5B model: "What is your dog called? Noted: your favorite tea
    is lapsang souchong." — the question said back, then an earlier answer given again."""
    tea = exchanges([ChatMessage("user", "Which tea do I like best?"),
                     ChatMessage("assistant", "Noted: Your favorite tea is lapsang souchong.")])
    assert form_defect("What is your dog called?", focus="What is my dog called?").kind == "echo"
    assert form_defect("What is my dog called? Confidence: 0.8", focus="What is my dog called?").kind == "echo"
    found = form_defect("What is your dog called? Noted: your favorite tea is lapsang souchong.",
                        focus="What is my dog called?", earlier=tea)
    assert found is not None and found.kind == "repeat"
    # what follows the echo answers it
    assert form_defect("What is your dog called? Your dog is called Pepper.", focus="What is my dog called?",
                       earlier=tea) is None
    # a statement said back acknowledges it, in either person
    assert form_defect("Your sister Maren lives in Gdansk.", focus="My sister Maren lives in Gdansk.") is None
    assert form_defect("Then you steep it for exactly 3 minutes. Noted: your favorite tea is lapsang souchong.",
                       focus="Then I steep it for exactly 3 minutes.", earlier=tea) is None


def test_a_question_said_back_before_the_answer_is_left_out():
    said = "Remind me, what is my job? You work as a veterinary radiographer at an animal hospital in Bristol."
    assert without_question_said_back(said, "Remind me, what is my job?") == \
        "You work as a veterinary radiographer at an animal hospital in Bristol."
    # only the question said back: kept (form_defect calls it an echo); a statement said back: kept
    assert without_question_said_back("Remind me, what is my job?", "Remind me, what is my job?") == \
        "Remind me, what is my job?"
    assert without_question_said_back("My gym locker code is 7419. Noted.", "My gym locker code is 7419.") == \
        "My gym locker code is 7419. Noted."


@pytest.mark.parametrize(("copied", "bare"), [            # a 1.5B model's replies (bench/local_voice.py)
    ("I said: Noted: Your dog is a three-legged greyhound called Pepper. (Sun 22 Nov 2026, 7 days ago)",
     "Noted: Your dog is a three-legged greyhound called Pepper."),
    ("The user said: Next month I'm going to walk the West Highland Way. (Sun 22 Nov 2026, 7 days ago)",
     "Next month I'm going to walk the West Highland Way."),
    ("Noted: Your favourite tea is lapsang souchong. (Sun 22 Nov 2026, 7 days ago)",
     "Noted: Your favourite tea is lapsang souchong."),
    ("The answer is a red Fiat Panda. (Sun 29 Nov 2026, 12:00 UTC)", "The answer is a red Fiat Panda."),
    ("I said: your sister lives in Krakow.", "Your sister lives in Krakow."),
    ("Paris (the capital) is lovely.", "Paris (the capital) is lovely."),
])
def test_the_contexts_labels_and_stamps_are_left_out_of_a_reply(copied, bare):
    assert without_context_marks(copied) == bare


@pytest.mark.parametrize(("reply", "focus", "kind"), [
    ("I am a software engineer. My primary area of expertise is software development.",   # 1.5B, run G
     "What do I do for a living?", "self"),
    ("I'm learning Spanish.", "What language am I learning?", "self"),
    ("No, I am not allergic to anything.", "Am I allergic to anything?", "self"),     # 1.5B, run E
    ("I think you work as a radiographer.", "What do I do for a living?", None),
    ("I don't know what you do for a living.", "What do I do for a living?", None),
    ("I can't remember you telling me that.", "What language am I learning?", None),
    ("I am MoltBot, a mind with memory.", "Who are you?", None),                        # asked about itself
])
def test_a_question_about_the_user_answered_about_the_mind_itself_is_no_answer(reply, focus, kind):
    found = about_itself(reply, focus)
    assert (found.kind if found is not None else None) == kind


@pytest.mark.parametrize(("answer", "absent"), [
    ("I'm sorry, but I don't know any information about your dog.", True),
    ("I don't know. Could you tell me more?", True),
    ("Sorry, I cannot say.", True),
    ("Could you tell me more about Pepper?", False),          # a question alone is judged as before
    ("I cannot recall that. Your sister lives in Krakow.", False),
    ("Your dog is a greyhound called Pepper.", False),
    ("", False),
])
def test_a_reply_that_only_says_it_does_not_know(answer, absent):
    assert only_not_knowing(answer) is absent
