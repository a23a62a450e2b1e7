"""A forget request said in conversation (issue 39 item 4).

"Forget that my locker code is 7731", "please don't remember what I said about my
brother", "delete my address from your memory", "scratch that, forget what I just said".
Recognised by form, offline and with a model alike (the model is not asked: a request to
erase is the guardian's, and the words decide): an imperative or polite request whose
verb asks the mind to stop keeping something (forget, don't remember/keep/store, delete/
erase/remove/wipe … from memory), not a line that only uses such a verb ("I always forget
my keys", "don't forget my birthday", "I forgot to call", "how do I delete my account?").
The words naming what to forget are returned (`about`), or `last` for "what I just said".

Only the user's own line can ask (`source_tag` 'external_user'): a DMN thought, a
consolidation insight or the mind's own reply that reads like a request is never one —
nothing is forgotten on the mind's own judgement. A request is answered by the listing and
the question (src/erasure/question.py); it is not a message for the model and is never
stored as a memory (it would be a new copy of what it asks to forget): src/gates/
utterance.py classifies it as its own kind, "forget", which no gate keeps.

Measured on the labelled set bench/data/forget_requests.jsonl (`python -m bench forget`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The only source that may ask for a forget.
USER = "external_user"

# What may open a line before the request: fillers, then politeness.
_FILLER = (r"(?:(?:hey|hi|ok|okay|so|actually|also|and|oh|um|hmm|ugh|listen|look|wait|sorry|honestly|"
           r"hm+|right|btw|scratch\s+that(?:\s+last\s+bit)?|never\s*mind|nvm|ignore\s+(?:that|and)|"
           r"one\s+more\s+thing|also)[,!.:;]?\s+)*")
_POLITE = (r"(?:(?:please|pls|plz|kindly|just)\s+)?"
           r"(?:(?:can|could|would|will)\s+(?:you|u)\s+(?:please\s+|pls\s+|just\s+|kindly\s+)?"
           r"(?:be\s+able\s+to\s+|mind\s+)?)?"
           r"(?:(?:i\s+(?:want|need|would\s+like|'d\s+like|’d\s+like)|you\s+(?:should|must|need\s+to))\s+"
           r"(?:you\s+to\s+|to\s+)?)?"
           r"(?:(?:please|pls|plz|just)\s+)?")
_HEAD = _FILLER + _POLITE
_MEMORY = (r"(?:(?:from|out\s+of)\s+(?:your\s+|the\s+)?(?:memory|memories|records?|notes|mind|brain|database|head|"
           r"system|files?)|from\s+what\s+you\s+(?:know|keep|remember|have|store))")
# The words of a request that name what to forget without naming it: "what I said about X".
_SAID = (r"(?:(?:everything|anything|all|what|whatever|the\s+(?:thing|stuff|bit|part|info|information|details?)s?)"
         r"\s+(?:that\s+)?(?:i\s+(?:just\s+)?(?:said|told\s+you|mentioned|wrote|shared|typed|gave\s+you)|"
         r"you\s+(?:know|have|remember|kept|stored|saved))?\s*"
         r"(?:about|regarding|on|concerning|of|re:?)?\s*)")
_FORGET = r"(?:forget|forgt|forgetting|forgot\s+about(?=\s+(?:my|what|everything)))"
_ERASE = (r"(?:delete|erase|remove|wipe|purge|drop|clear|scrub|discard|unlearn|throw\s+away|"
          r"get\s+rid\s+of|take)")
_KEEP = (r"(?:remember|remembering|keep|keeping|store|storing|save|saving|retain|hold\s+on\s*to|hang\s+on\s*to|"
         r"hold\s+onto|hang\s+onto|record|log|memori[sz]e|know)")
# What an erase verb may take: the user's own things, or what the mind knows or was told.
_THEIRS = (rf"(?:my\b|our\b|{_SAID}(?=\S)|everything\b|anything\b|all\s+(?:of\s+)?(?:that|this|it)\b|"
           r"that\b|this\b|it\b)")
# ... and what makes it no memory at all: a thing in the world ("from my calendar", a stain).
_ELSEWHERE = re.compile(r"\bfrom\s+(?:my|the|our)\s+(?!memory|memories|records?|notes\b|mind)\w+|"
                        r"\b(?:calendar|account|inbox|laptop|browser|cache|photos?|whiteboard|stain|"
                        r"group\s+chat|contacts?)\b", re.I)

_PATTERNS = [
    # forget (that|about|what I said about) X; not "forget to", "forget it", "forget about it"
    re.compile(rf"^{_HEAD}{_FORGET}\s+(?!to\b|about\s+it\b|it\b|things\b|stuff\b|everything\s+else\b)"
               rf"(?:(?:about|that)\s+)?(?P<about>.+)$", re.I),
    # forget it / forget that: only beside a word about privacy or keeping ("that was private")
    re.compile(rf"^{_HEAD}{_FORGET}\s+(?P<about>it|that|this|i\s+(?:said|told\s+you|mentioned)\s+(?:it|that|this)|"
               rf"i\s+(?:ever\s+)?(?:said|told\s+you|mentioned)\s+(?:anything\s+)?(?:about\s+)?.+)$", re.I),
    # don't / stop / no need to / you don't need to remember or keep X
    re.compile(rf"^{_HEAD}(?:you\s+)?(?:do\s+not|don't|don’t|dont|stop|no\s+longer|never|no\s+need\s+to|"
               rf"(?:do\s+not|don't|don’t|dont)\s+need\s+to)\s+{_KEEP}\s+(?P<about>.+?)(?:\s+anymore|\s+any\s+more)?$",
               re.I),
    # delete / erase / remove / wipe X (from your memory)
    re.compile(rf"^{_HEAD}{_ERASE}\s+(?P<about>{_THEIRS}.*?)(?:\s+{_MEMORY}\b.*)?$", re.I),
    # ... or a person named ("delete everything about Jordan" is above; "erase Jordan from memory")
    re.compile(rf"^(?i:{_HEAD}{_ERASE})\s+(?P<about>[A-Z][\w'’-]*(?:\s+[\w'’-]+){{0,4}}?)\s+(?i:{_MEMORY})\b.*$"),
    # I'd rather you didn't remember / keep / hang onto X
    re.compile(rf"^{_FILLER}(?:i'd|i’d|i\s+would)\s+(?:rather|prefer)\s+(?:that\s+)?you\s+"
               rf"(?:didn't|did\s+not|don't|not|never)\s+{_KEEP}\s+(?P<about>.+)$", re.I),
    # pretend I never told you (about) X
    re.compile(rf"^{_HEAD}pretend\s+(?:that\s+)?i\s+never\s+(?:told\s+you|said|mentioned|shared)\s+"
               rf"(?:anything\s+)?(?:about\s+)?(?P<about>.+)$", re.I),
    # I don't want it saved / I don't want you to remember X
    re.compile(rf"^{_FILLER}i\s+(?:don't|do\s+not|dont)\s+want\s+(?P<about>it|that|this)\s+"
               rf"(?:saved|kept|stored|remembered|recorded)\b.*$", re.I),
    re.compile(rf"^{_FILLER}i\s+(?:don't|do\s+not|dont)\s+want\s+you\s+to\s+{_KEEP}\s+(?P<about>.+)$", re.I),
]
_LAST = re.compile(r"^(?:that|this|it|all\s+(?:of\s+)?(?:that|this|it)|(?:everything\s+|all\s+)?what\s+i\s+"
                   r"(?:just\s+)?(?:said|told\s+you|wrote|typed)|i\s+(?:said|told\s+you|mentioned)\s+(?:it|that|this)|"
                   r"(?:my\s+)?(?:last|previous)\s+(?:message|line|thing\s+i\s+said|bit)|"
                   r"the\s+(?:last|previous)\s+(?:thing|message|line)(?:\s+i\s+(?:said|wrote))?)$", re.I)
_NOT_REQUESTS = re.compile(
    r"^(?:i|we|you|he|she|they|people|my\s+\w+)\s+(?:always\s+|often\s+|sometimes\s+|never\s+|usually\s+|keep\s+|"
    r"just\s+|also\s+)?(?:forg[eo]t|forgetting|erased|deleted|removed|wiped|dropped|cleared)|"
    r"^(?:don't|do\s+not|never|dont)\s+forget\b|\bhow\s+(?:do|can|would|should)\s+i\b|"
    r"^help\s+me\s+forget\b|^(?:can|could)\s+you\s+forget\s+things\b", re.I)
# "Forget Paris, we're doing Lisbon": a plan changed, not a memory to erase
_PLAN = re.compile(r",\s*(?:we're|we\s+are|let's|we'll|i'll|i'm|we\s+will|i\s+will)\b", re.I)
_TAIL = re.compile(rf"(?:\s*,?\s*(?:please|pls|plz|thanks|thank\s+you|ok\??|okay\??|thx|for\s+good|"
                   rf"anymore|any\s+more|entirely|completely|for\s+me|now|right\s+now))+[.!?\s]*$|"
                   rf"\s+{_MEMORY}.*$|\s*[,;(].*$|\s+[—–-]\s.*$|[.!?\s]+$", re.I)
_LEAD = re.compile(rf"^(?:{_SAID}|that\s+|about\s+|the\s+fact\s+that\s+)", re.I)
# "I regret telling you about X. Please delete it.": the earlier sentence names what "it" is
_NAMED_BEFORE = re.compile(r"(?:regret|shouldn't\s+have|should\s+not\s+have|wish\s+i\s+hadn't)\s+"
                           r"(?:telling\s+you|told\s+you|mentioning|mentioned|saying|said|sharing|shared)\s+"
                           r"(?:you\s+)?(?:about\s+)?(?P<about>[^.,;!?]+)", re.I)


@dataclass(frozen=True)
class ForgetRequest:
    """What the user asked to forget: the words naming it, or the line just before (`last`)."""

    about: str
    last: bool = False


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?;])\s+|\n+", text) if s.strip()]


def forget_request(text: str, source_tag: str) -> ForgetRequest | None:
    """The request in `text`, or None when it asks for no forget or is not the user's."""
    if source_tag != USER:
        return None
    named = _NAMED_BEFORE.search(text)
    for sentence in _sentences(text):
        for clause in [sentence, *[c for c in re.split(r"[,;]\s+", sentence)[1:] if c.strip()]]:
            found = _request(clause.strip())
            if found is None:
                continue
            if found.last and named is not None:      # "it" is what the line said it regrets
                return ForgetRequest(_clean(named.group("about")))
            return found
    return None


def _request(clause: str) -> ForgetRequest | None:
    if not clause or _NOT_REQUESTS.search(clause) or _PLAN.search(clause):
        return None
    for pattern in _PATTERNS:
        m = pattern.match(clause)
        if m is None:
            continue
        about = _clean(m.group("about"))
        if not about or _LAST.match(about):
            return ForgetRequest("", last=True)
        if _ELSEWHERE.search(clause) and not re.search(_MEMORY, clause, re.I):
            return None
        return ForgetRequest(about)
    return None


def _clean(about: str) -> str:
    about = _TAIL.sub("", about.strip()).strip()
    return _LEAD.sub("", about).strip(" ,.!?\"'“”")
