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

_POLITE = (r"(?:(?:hey|ok|okay|so|actually|also|and|oh|um|hmm|listen|look|wait|sorry|ugh)[,!.]?\s+)*"
           r"(?:(?:please|pls|plz|kindly)\s+)?"
           r"(?:(?:can|could|would|will)\s+(?:you|u)\s+(?:please\s+|pls\s+|just\s+|kindly\s+)?)?"
           r"(?:i\s+(?:want|need|would\s+like|'d\s+like|’d\s+like)\s+(?:you\s+)?to\s+)?"
           r"(?:(?:please|pls|plz|just)\s+)?")
_MEMORY = r"(?:from\s+(?:your\s+)?(?:memory|memories|records?|notes?|mind|brain|database|head)|from\s+what\s+you\s+(?:know|keep|remember))"
_WHAT_I_SAID = (r"(?:(?:everything|anything|all|what|whatever|the\s+(?:thing|stuff|bit|part|info|information)s?)\s+"
                r"(?:that\s+)?i\s+(?:just\s+)?(?:said|told\s+you|mentioned|wrote|shared|typed|gave\s+you)"
                r"(?:\s+(?:about|regarding|on|concerning|of))?)")
_ERASE = r"(?:delete|erase|remove|wipe|purge|drop|clear|scrub|discard|throw\s+away|get\s+rid\s+of)"
_KEEP = r"(?:remember|keep|store|save|retain|hold\s+on\s+to|record|log|memori[sz]e)"

_PATTERNS = [
    # forget that / forget what I said about X / forget my X / forget X (not "forget to", "forget it's")
    re.compile(rf"^{_POLITE}forget\s+(?!to\b|about\s+it\b|it\b(?!\s+all)|i\s+(?:asked|said\s+anything)\b)"
               rf"(?:(?:about|that)\s+)?(?P<about>.+)$", re.I),
    # don't remember / don't keep / stop remembering … X
    re.compile(rf"^{_POLITE}(?:do\s+not|don't|don’t|dont|stop|no\s+longer|never)\s+"
               rf"(?:{_KEEP}|remembering|keeping|storing|saving)\s+(?P<about>.+)$", re.I),
    # delete / erase / remove X from your memory; delete what I said about X; delete that
    re.compile(rf"^{_POLITE}{_ERASE}\s+(?P<about>.+?)\s+{_MEMORY}\b.*$", re.I),
    re.compile(rf"^{_POLITE}{_ERASE}\s+(?P<about>{_WHAT_I_SAID}.+|that|this|it|what\s+i\s+just\s+said)[.!?\s]*$", re.I),
    # I'd rather you didn't remember/keep X
    re.compile(r"^(?:i'd|i’d|i\s+would)\s+(?:rather|prefer)\s+(?:that\s+)?you\s+(?:didn't|did\s+not|don't|not)\s+"
               rf"(?:{_KEEP}|know)\s+(?P<about>.+)$", re.I),
]
_LAST = re.compile(r"^(?:that|this|it|what\s+i\s+(?:just\s+)?(?:said|told\s+you|wrote|typed)|"
                   r"(?:my\s+)?last\s+(?:message|line|thing\s+i\s+said)|the\s+last\s+thing(?:\s+i\s+said)?)$", re.I)
_NOT_REQUESTS = re.compile(
    r"^(?:i|we|you|he|she|they|people)\s+(?:always\s+|often\s+|sometimes\s+|never\s+|usually\s+|keep\s+)?forg[eo]t|"
    r"^(?:don't|do\s+not|never|dont)\s+forget\b|\bhow\s+(?:do|can|would|should)\s+i\s+", re.I)
_TAIL = re.compile(rf"(?:\s*,?\s*(?:please|pls|plz|thanks|thank\s+you|ok\??|okay\??))+[.!?\s]*$|"
                   rf"\s+{_MEMORY}.*$|[.!?\s]+$", re.I)
_LEAD = re.compile(rf"^(?:{_WHAT_I_SAID}\s*|that\s+|about\s+|the\s+fact\s+that\s+)", re.I)


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
    for sentence in _sentences(text):
        stripped = re.sub(r"^(?:scratch\s+that|never\s*mind|nvm)[,.;!]?\s*", "", sentence, flags=re.I)
        if not stripped or _NOT_REQUESTS.search(stripped):
            continue
        for pattern in _PATTERNS:
            m = pattern.match(stripped)
            if m is None:
                continue
            about = _LEAD.sub("", _TAIL.sub("", m.group("about")).strip()).strip(" ,.!?\"'“”")
            if not about or _LAST.match(about):
                return ForgetRequest("", last=True)
            return ForgetRequest(about)
    return None
