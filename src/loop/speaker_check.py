"""The user's facts said back as the user's, not as the mind's own (issue 38 item 3).

A 1.5B model answered "What tea do I like?" with "My favourite tea is lapsang souchong." and
"Tell me about my plans" with "Next month I'm going to walk the West Highland Way." — the
user's facts in the mind's mouth, then stored as what the mind said about itself
(`internal_self`). Insights get the same check (src/recall/speakers.py `claims_as_own`);
an answer gets it here, before delivery: each sentence that speaks in the first person and
restates one of the user's own first-person lines (most of its content words are in it) is
turned to the second person ("Your favourite tea is lapsang souchong."). What the mind says
of itself in words the user never used, and a sentence that already says "you", are left alone.

The user's lines: the user's messages in the prompt and what recall brought back of theirs
(memories and working memory whose speaker is the user). Only replies to the user are
checked: a thought of the mind's own may take up what the user holds — that is how a value
of its own forms from the user's (readiness milestone 10).

A reply that says one of the user's lines back and then goes on in the first person, as if the
user's life were the mind's, is cut after the saying back (`going_on_as_user`). `said_to_user`
is the whole check the loop runs on a reply to the user (src/loop/thinking.py).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence

from src.gates.contradiction import has_negation
from src.gates.utterance import content_words
from src.metacognition.answer_form import without_context_marks, without_question_said_back
from src.providers.protocols import ChatMessage
from src.recall.retrieval import Retrieval
from src.recall.speakers import USER, first_person, speaker_of, to_second_person

log = logging.getLogger(__name__)

#: The share of a sentence's content words one of the user's lines must hold for the
#: sentence to be a restatement of it, and how many at least ("Glad I got the quokkas
#: right." shares one word with the user's line about quokkas and restates nothing).
RESTATES = 0.6
MIN_SHARED = 2
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_ADDRESSED = re.compile(r"\b(?:you|your|yours|you're|yourself)\b", re.IGNORECASE)


def users_lines(messages: Sequence[ChatMessage], retrieval: Retrieval | None) -> list[str]:
    """What the user said in the first person: the prompt's messages (not the mind's framing
    lines, which start with "[") and the user's recalled memories and working memory."""
    lines = [m.content for m in messages if m.role == "user" and not m.content.startswith("[")]
    if retrieval is not None:
        lines += [r.hit.content for r in retrieval.memories if speaker_of(r.hit.source_tag, r.hit.metadata) == USER]
        lines += [w.content for w in retrieval.working if w.speaker == USER]
    return [line for line in lines if first_person(line)]


def said_as_users(answer: str, user_lines: Iterable[str]) -> str | None:
    """`answer` with each first-person sentence that restates a line of the user's turned to
    the second person; None when no sentence does."""
    theirs = [(content_words(line), has_negation(line)) for line in user_lines]
    if not theirs or not first_person(answer):
        return None
    out, changed = [], False
    for sentence in _SENTENCE.split(answer):
        words, negated = content_words(sentence), has_negation(sentence)
        # a sentence that already says "you" is about the user ("I think you like lapsang souchong");
        # one that denies the user's line speaks of the mind ("I do not work in an animal hospital":
        # turned, it told the user "You do not work in an animal hospital in Bristol")
        if words and first_person(sentence) and not _ADDRESSED.search(sentence) and any(
                len(words & t) >= MIN_SHARED and len(words & t) / len(words) >= RESTATES and negated == n
                for t, n in theirs):
            sentence, changed = to_second_person(sentence), True
        out.append(sentence)
    return " ".join(out) if changed else None


def going_on_as_user(answer: str, user_lines: Iterable[str]) -> str | None:
    """`answer` cut where it goes on as if the user's life were the mind's own: after a sentence
    that says one of the user's first-person `user_lines` back in the second person (at least
    `MIN_SHARED` of its content words), the first-person sentences that follow are the model
    continuing as the user ("You are a veterinary radiographer at an animal hospital in
    Bristol. I work with animals. I am very experienced…" to the statement; "You work as a
    veterinary radiographer… My job involves using X-rays…" to "What is my job?": a 1.5B model,
    issue 38's script) and are left out. None when nothing is cut."""
    theirs = [content_words(line) for line in user_lines if first_person(line)]
    if not theirs:
        return None
    out, said_back, cut = [], False, False
    for sentence in _SENTENCE.split(answer.strip()):
        if said_back and first_person(sentence) and not _ADDRESSED.search(sentence):
            cut = True
            continue
        if _ADDRESSED.search(sentence) and any(len(content_words(sentence) & t) >= MIN_SHARED for t in theirs):
            said_back = True
        out.append(sentence)
    return " ".join(out) if cut and out else None


def said_to_user(answer: str, focus: str, user_lines: Sequence[str]) -> str:
    """`answer` to the user's `focus` as the user reads it: without the context's marks and the
    question said back (src/metacognition/answer_form.py), the user's facts said as theirs
    (`said_as_users`), cut where it goes on as the user (`going_on_as_user`)."""
    answer = without_question_said_back(without_context_marks(answer), focus)
    if (theirs := said_as_users(answer, user_lines)) is not None:
        log.info("the answer said the user's facts in the first person; said back as the user's")
        answer = theirs
    if (cut := going_on_as_user(answer, [focus, *user_lines])) is not None:
        log.info("the answer went on as if the user's life were the mind's own; cut there")
        answer = cut
    return answer


__all__ = ["MIN_SHARED", "RESTATES", "going_on_as_user", "said_as_users", "said_to_user", "users_lines"]
