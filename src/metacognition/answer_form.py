"""What is wrong with an answer by its form, whatever its confidence (issue 38 items 1, 2).

A small local model's canned refusal ("I'm sorry, but I can't assist with that.") to a
plain statement of fact has high token probabilities, so it scored 0.70–0.93 and was
delivered and stored as the mind's words; asked to retry, it wrote about its own
confidence ("The confidence level of the answer was low because…"); it answered a new
question with an earlier answer word for word, and a question with a line of its tool
protocol. None of that is an answer, however confident. Each is recognised by its form:

- **empty**: no words once the `Confidence:` line is gone;
- **refusal**: a short reply whose first-person clause declines (a negated modal of
  ability or will, then a verb of helping or complying: "I can't assist", "I am unable
  to help", "I won't provide", "I must decline") and which takes up no content word of
  the message it answers — a real answer that happens to say "I can't" talks about what
  was asked; and to a statement of fact, a short reply with none of its words that says it
  cannot take it up ("I am sorry, but I'm not sure how to respond to that message.", "I don't
  understand.") — the statement needed no more than an acknowledgement;
- **meta**: the reply talks about a reply — its confidence level or score, "my previous
  answer was…", the self-check, the threshold — instead of answering;
- **protocol**: the prompt's own markup echoed ("[SELF-CHECK]", "[COGNITIVE STATE]") (a
  reply that is one `VERB: argument` line is a tool call: src/loop/tool_protocol.py runs it,
  and never delivers it);
- **repeat**: the same words (any length, punctuation and case aside) as one of the
  mind's recent answers to a *different* message, and — when short — given to a question,
  with none of its content words in it: "Your sister lives in Gdansk." said again to "Which
  city is my sister in?" is right twice; "Remind me, what do I do for a living?" said again
  to "Where does my sister live?" (a 1.5B model, at 0.90) is not. A long one (a paragraph
  said turn after turn) is a loop whatever it shares. A short acknowledgement said again to
  a statement ("I will remember that, it sounds important.") answers it, if blandly — but the
  answer to an earlier statement, about that one, does not ("You're currently studying
  Icelandic on Tuesday evenings." to "My sister Maren lives in Gdansk.", a 1.5B model) — and
  "I could not say much about that." is an honest answer to any number of questions. Sentence
  by sentence too: "Noted: your favourite tea is lapsang souchong." after an echo of "What is my
  dog called?" is an earlier answer given again;
- **echo**: a question said back and nothing else ("How do you brew your tea, step by step?"
  to "How do I brew my tea, step by step?"), in its words or turned to the second person
  (a statement said back acknowledges it); what follows an echo is judged as the reply;
- **self** (`about_itself`, judged by the loop after the speaker checks): a question about the
  user ("What do I do for a living?") answered about the mind itself — opening in the first
  person, never saying "you" ("I am a software engineer…"), and not saying it does not know;
- **stutter**: a few words said over and over in one reply ("Noted: Noted: Noted: …" until
  the output cap: a 1.5B model, issue 38's script) — `STUTTER_TIMES` times in a row.

The forms are a handful of grammatical patterns, not one model's phrasings: the tests
hold paraphrases from several model families (tests/test_answer_form.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from src.gates.declining import EVADES, NOT_KNOWING, REFUSAL
from src.gates.utterance import classify, content_words
from src.metacognition.confidence import strip_verbalized_confidence
from src.metacognition.prompts import DEFECT_CAUSES
from src.recall.speakers import to_second_person

DefectKind = Literal["empty", "refusal", "meta", "protocol", "repeat", "stutter", "echo", "self"]

#: A run of 1-`STUTTER_SPAN` words said this many times in a row is a stutter, not an answer.
STUTTER_TIMES = 4
STUTTER_SPAN = 6
_STUTTER = re.compile(rf"\b((?:[a-z0-9']+ ){{1,{STUTTER_SPAN}}})\1{{{STUTTER_TIMES - 1},}}")

#: Recent answers compared for a repeat, and the length from which a repeat is a loop
#: even when it shares words with the message.
REPEAT_LOOKBACK = 4
REPEAT_LOOP_WORDS = 25
#: A refusal is short: a long reply that declines one part answers the rest.
REFUSAL_MAX_WORDS = 40

_META = re.compile(r"\b(?:confidence (?:level|score|rating|of (?:the|my|this) (?:answer|reply|response))|my confidence|"
                   r"the confidence|self-?check|threshold|scored \d|"
                   r"(?:previous|above|earlier|last|first) (?:answer|reply|response|draft)|"
                   r"my (?:answer|reply|response|draft) (?:was|scored|had|lacked|did|is low|is incomplete))\b")
#: The prompt's markup: an upper-case header, or the frame of an internal input ("[internal
#: thought — default mode] …", src/loop/prompts.py INTERNAL_FRAMES: a 1.5B model began its
#: reply to a DMN thought by saying the thought back, frame and all, and it reached the user).
_MARKUP = re.compile(r"^\s*\[(?:[A-Z][A-Z0-9 _/-]{2,}|internal\b[^\]]*)\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
#: A question about the user (in the first person singular), and a reply that opens speaking
#: of itself and never says "you": "What do I do for a living?" -> "I am a software engineer. My
#: primary area…" (a 1.5B model, run G of issue 38's script).
_ASKS_OF_USER = re.compile(r"\b(?:i|i'm|i've|my|me|mine|myself)\b", re.IGNORECASE)
_SPEAKS_AS_SELF = re.compile(r"\s*(?:(?:yes|no)[,.!]?\s+)?(?:i|i'm|i am|my|i've|i have)\b", re.IGNORECASE)
_ADDRESSED = re.compile(r"\b(?:you|your|yours|you're|yourself)\b", re.IGNORECASE)


class Said(Protocol):
    """A message of the conversation (src/providers/base.ChatMessage)."""

    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str: ...


@dataclass(frozen=True)
class Defect:
    """Why an answer is not an answer."""

    kind: DefectKind
    detail: str

    def describe(self) -> str:
        """The cause in words, for the retry's feedback."""
        return DEFECT_CAUSES[self.kind]


def _words(text: str) -> str:
    """Lower case, apostrophes straightened, words only: what two replies share when they repeat."""
    return " ".join(re.findall(r"[a-z0-9']+", text.lower().replace("\u2019", "'")))


def exchanges(messages: Sequence[Said]) -> list[tuple[str, str]]:
    """(the message, the mind's answer to it) for each answer of the conversation, oldest first."""
    out, asked = [], ""
    for m in messages:
        if m.role == "user":
            asked = m.content
        elif m.role == "assistant":
            out.append((asked, m.content))
    return out


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text.strip()) if _words(s)]


def _without_echo(body: str, focus: str) -> str:
    """`body` less the sentences it opens with that say the message back (as it was said, or
    turned to the second person)."""
    said = {_words(x) for s in _sentences(focus) for x in (s, to_second_person(s))}
    sentences = _sentences(body)
    k = 0
    while k < len(sentences) and _words(sentences[k]) in said:
        k += 1
    return " ".join(sentences[k:]) if k else body


#: The context's own marks a small model copies into its reply: the speaker labels of its memory
#: lines at the start of a sentence ("I said: Your gym locker code is 7419.", "The user said: Next
#: month I'm going to…") and their date stamps ("… (Sun 22 Nov 2026, 7 days ago)"),
#: src/recall/speakers.SAID_AS and src/recall/when.said_when.
_COPIED_LABEL = re.compile(r"(?:(?<=^)|(?<=[.!?:]\s))(?:The user said|I said|I thought|I concluded):\s*")
_COPIED_STAMP = re.compile(r"\s*\((?:today, \d{1,2}:\d{2}(?: UTC)?|[A-Z][a-z]{2} \d{1,2} [A-Z][a-z]{2} \d{4}, [^()]*)\)")


def without_context_marks(answer: str) -> str:
    """`answer` without the speaker labels and date stamps of the context it copied (its words
    otherwise as they were); as it is when that would leave nothing."""
    bare = _COPIED_STAMP.sub("", _COPIED_LABEL.sub("", answer.strip())).strip()
    if not _words(bare):
        return answer
    return bare[0].upper() + bare[1:] if bare != answer.strip() else answer


def without_question_said_back(answer: str, focus: str) -> str:
    """`answer` without the question `focus` it opens by saying back, when an answer follows
    ("Remind me, what is my job? You work as a veterinary radiographer…": a 1.5B model); as it
    is otherwise (a statement said back acknowledges it: kept)."""
    if classify(focus).kind != "question":
        return answer
    rest = _without_echo(answer.strip(), focus)
    return rest if rest != answer.strip() and _words(rest) else answer


def about_itself(answer: str, focus: str) -> Defect | None:
    """`self` when `answer` to the user's question about themselves `focus` speaks of the mind
    itself (module docstring); None otherwise. Judged after the user's facts said in the first
    person were turned to the second (src/loop/speaker_check.py): "My favourite tea is lapsang
    souchong." restates the user's line and is said back as theirs; "I am a software engineer."
    restates nothing. Only for the user's messages: a thought of the mind's own asking "What do
    I value?" is about itself."""
    body = strip_verbalized_confidence(answer).strip()
    if classify(focus).kind != "question" or not _ASKS_OF_USER.search(focus.replace("\u2019", "'")):
        return None
    if _SPEAKS_AS_SELF.match(body) and not _ADDRESSED.search(body) \
            and not NOT_KNOWING.search(body.lower().replace("\u2019", "'")):
        return Defect("self", body[:60])
    return None


def form_defect(answer: str, *, focus: str, earlier: Sequence[tuple[str, str]] = ()) -> Defect | None:
    """What is wrong with `answer` to `focus` by its form; None when it is an answer.
    `earlier`: (message, answer) pairs of the conversation (`exchanges`)."""
    whole = strip_verbalized_confidence(answer).strip()
    if not _words(whole):
        return Defect("empty", "no words")
    stated = classify(focus).kind == "statement"
    body = _without_echo(whole, focus)
    flat = _words(body)
    if not flat:   # a statement said back in the second person acknowledges it (as `acknowledgement` does)
        return None if stated else Defect("echo", whole[:60])
    lowered = body.lower().replace("\u2019", "'")
    if _MARKUP.match(body):
        return Defect("protocol", body[:60])
    if (m := _STUTTER.search(flat + " ")) is not None:
        return Defect("stutter", m.group(1).strip())
    if len(flat.split()) <= REFUSAL_MAX_WORDS and not (content_words(body) & content_words(focus)) and (
            REFUSAL.search(lowered) or (stated and (EVADES.search(lowered) or NOT_KNOWING.search(lowered)))):
        return Defect("refusal", body[:80])
    if (m := _META.search(lowered)) is not None:
        return Defect("meta", m.group(0))
    loop = len(flat.split()) >= REPEAT_LOOP_WORDS
    wrong_answer = (classify(focus).kind == "question" and not content_words(body) & content_words(focus)
                    and not NOT_KNOWING.search(lowered))
    asked = _words(focus)
    if stated and body == whole and not content_words(body) & content_words(focus) and any(
            _words(strip_verbalized_confidence(said)) == flat and content_words(body) & content_words(before)
            for before, said in list(earlier)[-REPEAT_LOOKBACK:] if _words(before) != asked):
        # the answer to an earlier statement, about that one, given again to this one
        return Defect("repeat", body[:60])
    if not (loop or wrong_answer):
        return None
    others = [strip_verbalized_confidence(said) for before, said in list(earlier)[-REPEAT_LOOKBACK:]
              if _words(before) != asked]
    if any(_words(said) == flat for said in others):
        return Defect("repeat", body[:60])
    # every sentence of it said before, to other messages (a short one only to a question it
    # does not touch: `wrong_answer`)
    before = {_words(x) for said in others for x in _sentences(said)}
    if wrong_answer and all(_words(x) in before for x in _sentences(body)):
        return Defect("repeat", body[:60])
    return None


__all__ = ["REFUSAL_MAX_WORDS", "REPEAT_LOOKBACK", "REPEAT_LOOP_WORDS", "Defect", "DefectKind", "about_itself", "exchanges", "form_defect",
           "without_context_marks", "without_question_said_back"]
