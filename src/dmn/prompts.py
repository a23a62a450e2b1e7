"""What the DMN says to the loop (plan §4.7): the self-prompts, the mind's own thoughts.

The one DMN item of a tick that is queued as input (`loop.submit("dmn", …)`, framed as
an internal thought by src/loop/prompts.py) is a self-prompt (channel 1: a memory that
reaches a goal, or with no goal in reach a spontaneous one) or a review of the last
attention choice. Channels 2 and 3 (creative pairs, identity signals) are records the
next deep pass turns into questions for its insights (src/consolidation/deep/dmn_inputs.py):
`association_question` and `value_question` below; their record texts stay in channels.py.

A self-prompt names who said the memory it recalls (issue 38 item 7), as the rest of the mind
does (src/recall/speakers.py): "the user said '…'", "I said '…'", "Jolene said '…'". A
1.5B model that read "This comes back to me, from 1372 days ago: '…'" about an imported
stranger's line took it for the user's words or its own and answered "I'm sorry, but I don't
have enough information". So an imported conversation is said to be someone else's, and the
question asked of it is one its words can answer: what it tells about the person who said it.
"""

from __future__ import annotations

from collections.abc import Mapping

from src.recall.speakers import Speaker, words_of
from src.text import excerpt

#: A recalled memory with who said it, in the mind's words to itself (a DMN thought is the
#: mind's own: "the user", never "you"). Without a speaker the memory is quoted as it is.
RECALLED_AS: Mapping[str, str] = {
    "user": "the user said '{text}'",
    "self": "I said '{text}'",
    "thought": "I thought '{text}'",
    "conclusion": "I concluded '{text}'",
    "correction": "I corrected myself: '{text}'",
    "person": "{name} said '{text}'",
}
#: What an imported stranger's line is: not the user's, not the mind's. No "I" or "my" in it: a
#: kept thought that says it is not about the self (src/dmn/sampling.about_self).
SOMEONE_ELSES = ("in an imported conversation: someone else's conversation, "
                 "not one with the user or with me")


def recalled(memory: str, speaker: Speaker | None, chars: int) -> str:
    """A recalled memory with its speaker in words ("the user said '…'"); quoted as it is without one."""
    text = excerpt(words_of(memory, speaker), chars)
    if speaker is None:
        return f"'{text}'"
    return RECALLED_AS[speaker.kind].format(text=text, name=speaker.name or "someone")


def _capitalized(text: str) -> str:
    return text[:1].upper() + text[1:]


def goal_self_prompt(memory: str, goal: str, chars: int, *, speaker: Speaker | None = None,
                     imported: bool = False) -> str:
    """Channel 1: a sampled memory that reaches a goal, with who said it; `imported` (an imported
    stranger's, src/dmn/sampling.imported_stranger) says the conversation was someone else's."""
    said = _capitalized(recalled(memory, speaker, chars))
    if imported:
        said += f" ({SOMEONE_ELSES})"
    link = " connects" if speaker is None else ", which connects"
    return f"{said}{link} to my goal '{excerpt(goal, chars)}'. What does it suggest I do next?"


def spontaneous_self_prompt(memory: str, days_ago: float, chars: int, *, speaker: Speaker | None = None,
                            imported: bool = False) -> str:
    """Channel 1 without a goal in reach: the memory itself, who said it, and why it might matter;
    of an imported stranger's line, that it was someone else's and what it tells about them."""
    when = "today" if days_ago < 1 else f"{days_ago:.0f} days ago"
    said = recalled(memory, speaker, chars)
    if not imported:
        return f"This comes back to me, from {when}: {said}. Why does it matter now?"
    about = f" about {speaker.name}" if speaker is not None and speaker.kind == "person" and speaker.name else ""
    return f"This comes back to me, from {when}: {said}, {SOMEONE_ELSES}. What does it tell me{about}?"


def review_self_prompt(winner: str, loser: str, loser_source: str, chars: int) -> str:
    """The metacognitive review: the last cycle's choice, and whether it was right."""
    return (f"Last cycle I prioritised '{excerpt(winner, chars)}' over "
            f"'{excerpt(loser, chars)}' ({loser_source}). "
            "Was that right? Should I revisit it?")


def association_question(first: str, second: str, days_apart: float, chars: int) -> str:
    """Channel 2 for the deep pass: what connects two memories far apart in time."""
    return (f"What connects '{excerpt(first, chars)}' and '{excerpt(second, chars)}', "
            f"{days_apart:.0f} days apart, and what does the connection show?")


def value_question(memory: str, value: str, chars: int) -> str:
    """Channel 3 for the deep pass: whether a memory confirms, refines or challenges a value."""
    return (f"Does '{excerpt(memory, chars)}' confirm, refine or challenge my value "
            f"'{excerpt(value, chars)}'?")
