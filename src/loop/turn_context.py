"""What the model reads beside each input, laid out for a server's prompt cache (issue 38).

A local server (llama.cpp's `llama-server`, vLLM, Ollama) keeps the tokens of the last
request and re-reads only from the first one that differs. Recalled memories change every
turn; in the system prompt, ahead of the conversation, they made every turn re-read nearly
all of it (measured with a 1.5B model: 176 of 1,202 tokens reused, ~31 tokens/s on two
cores, a median turn of 33.8 s). So the request is laid out stable first:

1. the system prompt: who the mind is, its boundaries (immutable), the ask for a stated
   confidence; what changes only when a tool or skill is offered for a focus;
2. the conversation, each earlier input sent again with the context it was answered with
   (`Message.context`, src/context/fifo.py), so every earlier message reads the same;
3. this input, after its context (`TurnContext.text`): what "now" is, the memories that
   surfaced (identity and situational tracks, plan §3.2), the skills near it, the cognitive
   state report, the memory mode, the gut line, past corrections, the cost line — each of the
   last said only when no context the request sends says it already (a cost line of
   "$0.00" every turn is tokens the server reads anew for nothing).

A memory already listed in a context still in the window is not listed again, except the
`repeat_top` most relevant of this turn's situational memories (a small model uses what sits
next to the question); a line says how many more are further up. The FIFO prunes the window
in steps (`context.fifo.low_water`), so the conversation's start moves seldom.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from src.context.fifo import Message, TurnContext
from src.context.tracks import render_section
from src.loop.prompts import CONTEXT_CLOSE, CONTEXT_OPEN, earlier_listed
from src.recall.when import WHEN_NOTE

#: Of this turn's situational memories, the most relevant are listed again even when an
#: earlier context in the window listed them: next to the question is where a small model
#: reads them.
REPEAT_TOP = 1
#: At most this many situational memories a context in the window does not list yet, the
#: most relevant first: what a turn adds to the request is what the server reads anew (a
#: 4,096-token window's situational share held ~25 lines, ~850 tokens a turn with the state
#: report; a small model uses the first few).
NEW_TOP = 4


def listed_in(messages: Iterable[Message]) -> frozenset[int]:
    """The memories the contexts of `messages` list."""
    return frozenset().union(*(m.shown for m in messages))


def contexts_of(messages: Sequence[Message]) -> str:
    """The contexts `messages` are sent with, one text ("" when none is)."""
    return "\n".join(m.context for m in messages if m.context)


def turn_context(sections: Sequence, listed: frozenset[int], parts: Sequence[str], *,
                 now: str = "", repeat_top: int = REPEAT_TOP, new_top: int = NEW_TOP,
                 said_before: str = "") -> TurnContext:
    """This input's context: `now` (its `WHEN_NOTE` once while a context further up says it),
    the memory `sections` (identity, situational; the
    immutable one is the system prompt's) less what `listed` holds (situational: the
    `repeat_top` first again, at most `new_top` new), then `parts` (missing line, skills,
    state report, memory mode, gut, corrections, cost line; empty ones left out, and one
    `said_before` word for word — in a context the request sends further up — left out: it is
    still in view, and what a turn adds is what the server reads anew)."""
    shown: set[int] = set()
    if now.endswith(WHEN_NOTE) and WHEN_NOTE in said_before:   # the time changes; the note does not
        now = now.removesuffix(WHEN_NOTE).rstrip()
    blocks = [now] if now else []
    for section in sections:
        if section.name == "immutable":
            continue
        keep, new = [], 0
        for rank, p in enumerate(section.entries):
            if section.name != "situational":
                if p.id not in listed:
                    keep.append(p)
            elif rank < repeat_top or (p.id not in listed and new < new_top):
                keep.append(p)
                new += p.id not in listed
        shown.update(p.id for p in keep)
        # the session-stats line says much the same every turn: once while a context lists memories
        extra = section.extra if section.name != "identity" or not listed else ()
        lines = render_section(section.text.split("\n", 1)[0], keep, extra) if section.text else ""
        more = len(section.entries) - len(keep)
        if more:
            lines = "\n".join(x for x in (lines or section.text.split("\n", 1)[0], earlier_listed(more)) if x)
        if lines:
            blocks.append(lines)
    blocks += [p for p in parts if p and p not in said_before]
    if not blocks:
        return TurnContext("", frozenset())
    return TurnContext("\n\n".join([CONTEXT_OPEN, *blocks, CONTEXT_CLOSE]), frozenset(shown))


__all__ = ["REPEAT_TOP", "TurnContext", "listed_in", "turn_context"]
