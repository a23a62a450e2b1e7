"""What kind of thing the user said: a statement that carries information, a question,
or chatter (issue 22; plan §2.8's permissive gate made concrete for the user's words).

The exit gate's relevance axis is spreading activation from an attention focus. For
the user's own words that axis cannot decide alone: a fact stated out of the blue
("I am allergic to penicillin.") is unrelated to whatever the conversation was about,
yet it is exactly what a user expects the mind to keep. What decides instead is
whether the line tells the mind something about the user's world:

- **statement**: at least one clause that is not a question and has a content word
  (a word that is neither a function word nor a conversational reaction), or a
  number. Kept: the gate treats it as core.
- **question**: every clause with content is a question (starts with a question
  word or auxiliary, a request such as "tell me", or ends in "?"), and no yes/no
  question carries much of the user's own world (first person with three or more
  content words: "Should I tell my boss Karen that I'm quitting?" is kept as a
  statement; "what is my neighbour's parrot called?" has a gap where the answer goes).
  A question is not a fact: it is not stored, so it cannot crowd recall.
- **chatter**: nothing with content ("ok", "thanks!", "haha nice", "good morning").
- **forget**: a request to forget something ("forget that my locker code is 7731";
  src/gates/forget_request.py, issue 39). Never kept: it would be one more copy of what it
  asks to forget. The guardian's confirmation decides (src/erasure/question.py).

The rule leans towards keeping: an unknown word counts as content, so a line in a
language the lists do not cover is a statement unless it is a clear question. Pure
and deterministic; the labelled set in bench/data/utterances.jsonl measures it
(`python -m bench gates`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from src.gates.forget_request import USER, forget_request

Kind = Literal["statement", "question", "chatter", "forget"]

# Function words: they carry grammar, not information about the user's world.
FUNCTION_WORDS = frozenset("""
a an the and or but nor so yet if then than that this these those there here it its it's
i i'm i've i'd i'll me my mine myself we we're we've us our ours you you're you've your yours
he he's him his she she's her hers they they're them their theirs one ones
is am are was were be been being do does did done doing have has had having
will would shall should can could may might must ought won't wouldn't can't couldn't don't
doesn't didn't isn't aren't wasn't weren't haven't hasn't hadn't shouldn't let let's
to of in on at by for with about from into onto over under up down out off as
not no yes too very just also only still even again ever really quite some any all
what which who whom whose when where why how what's who's where's how's when's
there's here's that's also maybe perhaps probably well oh ah um uh er hmm hm mm
get got go going gonna wanna know think said say tell told telling remember remind
mean means something anything nothing everything thing things stuff kind sort lot bit
""".split())

# Conversational reactions: greetings, thanks, acknowledgement, laughter, small talk.
REACTION_WORDS = frozenset("""
ok okay okey k kk alright allright sure fine cool nice great good awesome amazing
perfect excellent lovely wonderful brilliant fantastic super sweet neat
thanks thank thx ty cheers appreciate appreciated welcome please pls sorry
hi hello hey heya hiya yo howdy greetings morning afternoon evening night goodnight
bye goodbye later cya see soon take care
lol lmao rofl haha hahaha hehe heh ha wow whoa omg yay yup yep yeah yea nope nah
right true exactly indeed agreed agree absolutely definitely totally certainly
interesting funny fun hilarious cute wild crazy
makes make sense sounds seems looks understood understand gotcha noted
hope hoping day today weather everyone everybody doing day's
okie dokie brb nvm nevermind ugh meh ya u ur tbh idk imo bad fair enough guess saying
bot much many happy ask asked asking asks question answer
congrats congratulations ciao tty ttyl gn gm xd xo xoxo lmk np yw jk smh ikr mhm sheesh dang
damn darn oops whoops yikes hooray woohoo yippee aww awww ooh hah welp sup wassup whatever
anyway anyways dope rad wicked solid fab gorgeous beautiful incredible unbelievable insane
ridiculous weird strange odd sad shame pity glad same correct wrong incorrect clear obviously
course problem worries worry matter mind deal point idea hear heard continue ahead wait hold
stop sec moment ready done back more less both either neither sounds sound cool wonderful
chat chatting talk talking talked nice meet meeting hearing seeing bye-bye bot robot assistant
danke bitte hallo tschüss gracias hola adiós adios merci bonjour salut oui non ja nein sí
""".split())

QUESTION_OPENERS = frozenset("""
what which who whom whose when where why how what's who's where's how's when's why's
do does did is are was were am can could would will should shall may might have has had
isn't aren't wasn't weren't don't doesn't didn't can't couldn't won't wouldn't shouldn't
any anything anyone
""".split())

# Requests that ask rather than tell ("tell me a joke", "remind me when my flight is").
REQUEST_OPENERS = ("tell me", "show me", "give me", "help me", "explain", "write me", "write a",
                   "translate", "set a", "set an", "make me", "recommend", "suggest", "find me",
                   "let me know", "do you remember", "do you know", "can you", "could you",
                   "would you", "will you", "what about", "how about", "guess")
# Openers that announce information even in a request's clothing.
TELLING_OPENERS = ("remember that", "remember my", "remember i", "note that", "fyi", "btw",
                   "for the record", "just so you know", "heads up", "reminder that",
                   "don't forget that", "dont forget that", "keep in mind")

_WH = frozenset("what which who whom whose when where why how what's who's where's how's when's why's".split())
_FILLERS = frozenset("oh ah um uh er hmm hm mm so and but well also then".split())
FIRST_PERSON = frozenset("i i'm i've i'd i'll my mine myself we we're our ours".split())
# A question this rich in the user's own world is kept (permissive side).
QUESTION_KEEP_CONTENT = 3

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
_CLAUSE_SPLIT = re.compile(r"(?<=[.!?;…])\s+|\n+|\s+[—–-]{1,2}\s+|(?<=[.!?])(?=[^\s.!?])")


@dataclass(frozen=True)
class Utterance:
    """The verdict on one line: its kind, the content words it rests on, and why."""

    kind: Kind
    content_words: frozenset[str]
    reason: str


def words(text: str) -> list[str]:
    """Lower-case words (letters and digits, inner apostrophes kept as ')."""
    return [w.replace("’", "'") for w in _WORD.findall(text.lower())]


def content_words(text: str) -> frozenset[str]:
    """Words that carry information: not function words, not reactions; numbers count.
    A possessive is its noun ("Mara's" is "mara")."""
    return frozenset(w[:-2] if w.endswith("'s") and len(w) > 3 else w for w in words(text)
                     if w not in FUNCTION_WORDS and w not in REACTION_WORDS)


def _clauses(text: str) -> list[str]:
    return [c.strip() for c in _CLAUSE_SPLIT.split(text.strip()) if c and c.strip()]


def _is_question(clause: str, ws: list[str]) -> bool:
    # a leading "hmm", "ok so", "oh and" does not change what the clause does
    while ws and (ws[0] in REACTION_WORDS or ws[0] in _FILLERS):
        ws = ws[1:]
    low = " ".join(ws)
    if any(low.startswith(t) for t in TELLING_OPENERS):
        return False
    if clause.lstrip().startswith("¿") or any(low.startswith(r) for r in REQUEST_OPENERS):
        return True
    if ws and ws[0] in QUESTION_OPENERS:
        return clause.rstrip().endswith("?") or ws[0] not in {"any", "anything", "anyone", "have", "has", "had"}
    return clause.rstrip().endswith("?")


def classify(text: str) -> Utterance:
    """statement / question / chatter / forget for one line the user typed; see the module docstring."""
    if (request := forget_request(text, USER)) is not None:
        return Utterance("forget", content_words(request.about), "a request to forget something")
    statements: set[str] = set()
    asked: set[str] = set()
    rich_question: str | None = None
    for clause in _clauses(text):
        ws = words(clause)
        content = content_words(clause)
        if not content:
            continue
        if _is_question(clause, ws):
            asked |= content
            # a yes/no question carries a whole proposition ("Did I mention my uncle Tomasz
            # is a pilot?"); a wh-question has a gap where the answer goes
            if (len(content) >= QUESTION_KEEP_CONTENT and FIRST_PERSON & set(ws)
                    and not _WH & set(ws[:2])):
                rich_question = clause
        else:
            statements |= content
    if statements:
        return Utterance("statement", frozenset(statements | asked),
                         f"states something ({', '.join(sorted(statements)[:5])})")
    if rich_question is not None:
        return Utterance("statement", frozenset(asked),
                         f"a question that tells about the user's world ({', '.join(sorted(asked)[:5])})")
    if asked:
        return Utterance("question", frozenset(asked), "a question: asks, states nothing new")
    return Utterance("chatter", frozenset(), "chatter: no word that carries information")
