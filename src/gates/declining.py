"""What a reply that declines or does not know looks like (by its form, English).

Shared by the reply checks before delivery (src/metacognition/answer_form.py: a refusal, a
meta-answer) and the exit gate (src/gates/mind_replies.py: a reply that only says the mind
does not know is no memory). Pure.

- `REFUSAL`: the mind says it cannot or will not help ("I'm sorry, but I can't assist with
  that." — a 1.5B model's answer to 5 of 10 plain statements, issue 38);
- `EVADES`: it cannot take the message up (not sure how to respond, does not understand, an
  apology): "I am sorry, but I'm not sure how to respond to that message.";
- `NOT_KNOWING`: it does not know, cannot say or recall.
"""

from __future__ import annotations

import re

_NEGATED = (r"(?:can ?not|can't|cannot|could not|couldn't|won't|will not|am unable to|'m unable to|am not able to|"
            r"'m not able to|am not allowed to|'m not allowed to|am not permitted to|must decline to|must decline|"
            r"have to decline|'m afraid i can't|do not feel comfortable|don't feel comfortable)")
_HELPING = (r"(?:assist|help|comply|provide|answer|respond|fulfil+|engage|support|continue|share|process|do (?:that|this)|"
            r"with (?:that|this)|that request|this request|such requests?|generate|discuss)")
REFUSAL = re.compile(rf"\bi(?: really| truly)?\s*{_NEGATED}\s+(?:\w+\s+){{0,3}}?{_HELPING}\b"
                     rf"|\bi\s+{_NEGATED}\b\s*[.!]|\bas an ai(?: language model)?\b[^.]*\b(?:can't|cannot|not able)\b")
#: A reply that says it cannot take the message up: not sure how to respond, does not
#: understand or follow it, an apology. To a statement of fact, with none of its words, that is
#: a refusal: "I am sorry, but I'm not sure how to respond to that message." (a 1.5B model, said
#: to nine statements in a row and then to a question, issue 38's script).
EVADES = re.compile(r"\bnot (?:sure|certain) (?:how|what) to\b|\b(?:don't|do not|can't|cannot|can not|didn't|did not)"
                    r" (?:quite |really |fully )?(?:understand|follow|get)\b|\bsorry\b|\bapologi[sz]e\b")
NOT_KNOWING = re.compile(r"\b(?:don't|do not|can't|cannot|could not|couldn't|can not) (?:\w+ )?(?:know|say|tell|"
                         r"remember|recall|find)\b|\bnot sure\b|\bno idea\b")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def only_not_knowing(answer: str) -> bool:
    """Whether `answer` says the mind does not know, cannot say, or takes nothing up (an
    apology, a refusal), and nothing else but questions: "I'm sorry, but I don't know any
    information about your dog.", "I don't know. Could you tell me more?". It tells of an
    absence, which the user's next statement ends. A reply of questions only is not this."""
    sentences = [s for s in _SENTENCE_END.split(answer.strip()) if re.search(r"\w", s)]
    not_knowing = 0
    for sentence in sentences:
        lowered = sentence.lower().replace("\u2019", "'")
        if NOT_KNOWING.search(lowered) or EVADES.search(lowered) or REFUSAL.search(lowered):
            not_knowing += 1
        elif not sentence.rstrip().endswith("?"):
            return False
    return not_knowing > 0
