"""The request fits the model (issue 27): the budget in the model's tokens, and the last
measure of each turn's prompt before System 1 is asked.

`budget_for` resolves the context budget (src/context/settings.py, plan §3.2's table as
shares of the window) against System 1's context window, as our token counts can fill it:
the window less the reply's max tokens, divided by the model's margin
(src/providers/context_window.py), plus the reply. The FIFO's maximum and every section's
budget follow from it.

`fit_turn` measures the finished system prompt and the input, and gives the conversation
what is left (newest first, never more than the budget's share): the parts of the system
prompt no section budget covers (instructions, the state report, the cost and gut lines,
skills, corrections) are counted as they are, not guessed. An input that does not fit even
alone is cut with a note the model reads (`INPUT_CUT`), logged, never dropped. The input
goes out pinned: the provider's own guard (`ContextWindow`'s `fit`) may still drop older
history from a retry or a tool round, never the input.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from src.context.fifo import Message
from src.context.prompts import INPUT_CUT
from src.context.settings import DEFAULT_REPLY, ContextBudget
from src.providers.context_window import ContextWindow, count_request, message_tokens, window_of
from src.providers.protocols import ChatMessage
from src.tokens import count_tokens, cut_to_tokens

log = logging.getLogger(__name__)


def budget_for(budget: ContextBudget, llm: object) -> ContextBudget:
    """`budget` in tokens for System 1 `llm` (module docstring); a model that states no window
    (reflex mode, a test double) gets the budget's own window or the plan's 128k."""
    max_out = getattr(llm, "max_output_tokens", None)
    reply = budget.output_reserve if budget.output_reserve is not None else (
        max_out if isinstance(max_out, int) else DEFAULT_REPLY)
    window = window_of(llm)
    if window is None or budget.context_window is not None:
        return budget.resolve(reply=reply)
    resolved = budget.resolve(window.prompt_limit(reply) + reply, reply)
    log.info("context budget for a window of %s: immutable %d, identity %d (expected %d), situational %d, "
             "state %d, reply %d, conversation %d tokens", window.describe(), resolved.immutable,
             resolved.identity_cap, resolved.identity_expected, resolved.situational,
             resolved.cognitive_state, resolved.output_reserve, resolved.conversation_tokens)
    return resolved


@dataclass(frozen=True)
class Request:
    """What System 1 is sent: the history that fits, the input (pinned), whether it was cut."""

    messages: list[ChatMessage]
    history: int          # messages of the conversation window sent
    cut: bool             # the input was cut to fit
    context_from: int = 0  # index in the window of the first message sent with its context


@dataclass(frozen=True)
class TurnInput:
    """The input as the model reads it (`text`), what it reads ahead of it (`context`), and
    for a combined turn its messages (`parts`) and how they make `text` (`render`)."""

    text: str
    context: str = ""
    parts: Sequence[str] = ()
    render: Callable[[Sequence[str]], str] | None = None


def fit_turn(llm: object, budget: ContextBudget, system: str, history: Sequence[Message], turn: TurnInput | str,
             *, limit: int, context_from: int = 0) -> Request:
    """The turn's messages within the window of `llm` (else the budget's), the history at
    most `limit` of our tokens (the conversation's share this cycle).

    `turn.parts` and `turn.render`: the messages of a combined turn and how they make its text.
    When it does not fit, the longest messages are cut first, each keeping its beginning, so
    a long paste never hides the short messages sent with it (issue 41 item 8: a 21,405-
    character paste cut at the end took the two questions after it with it). `turn.context`:
    what the model reads ahead of the input (src/loop/turn_context.py), never cut; the input
    is cut to the room it leaves.

    The history's own contexts (`Message.context`) use the room its words leave (they are
    not the conversation's share): sent from window index `context_from` on while they fit;
    when they do not, from a later index where they take at most a quarter of that room, the older
    messages sent bare. So the request changes ahead of its end only every few turns (a
    server's prompt cache re-reads from the first token that differs)."""
    turn = turn if isinstance(turn, TurnInput) else TurnInput(turn)
    user_text, context, parts, render = turn.text, turn.context, turn.parts, turn.render
    window = window_of(llm) or ContextWindow(budget.resolve().context_window or 1, "the context budget", 1.0)
    reply = budget.resolve().output_reserve or 0
    room = window.prompt_limit(reply) - count_request(system, ())
    beside = message_tokens(ChatMessage("user", "", context=context)) - message_tokens(ChatMessage("user", ""))
    text, cut = user_text, False
    if message_tokens(ChatMessage("user", text)) > room - beside:
        fitted = fit_parts(parts, room - beside, render) if render is not None and len(parts) > 1 else None
        text, cut = (fitted, True) if fitted is not None else _cut_input(user_text, room - beside)
        log.warning("the input (%d characters) does not fit the context window of %s; sent cut to %d "
                    "characters, with a note saying so", len(user_text), window.describe(), len(text))
    spare = room - message_tokens(ChatMessage("user", text, context=context))
    left = min(limit, spare)
    kept: list[Message] = []
    for message in reversed(history):       # newest first, as AdaptiveFifo.window
        if message.tokens > left:
            break
        left -= message.tokens
        kept.append(message)
    kept.reverse()
    while kept and kept[0].role == "assistant":   # a conversation opens with a user turn
        kept.pop(0)
    first = len(history) - len(kept)
    start = _contexts_from(kept, max(0, context_from - first), spare - sum(m.tokens for m in kept))
    sent = [m.chat if k >= start else m.bare for k, m in enumerate(kept)]
    return Request([*sent, ChatMessage("user", text, pinned=True, context=context)], len(sent), cut, first + start)


def _contexts_from(kept: Sequence[Message], start: int, room: int) -> int:
    """The first of `kept` sent with its context: `start` while the contexts from there fit
    in `room`, else the first from which they take at most a quarter of it (so the next
    such step is several turns away)."""
    tail = [m.context_tokens for m in kept]
    if sum(tail[start:]) <= room:
        return start
    total = sum(tail[start:])
    while start < len(kept) and total > room // 4:
        total -= tail[start]
        start += 1
    return start


#: A message of a combined turn keeps at least this many tokens of its beginning.
MIN_PART_TOKENS = 16


def fit_parts(parts: Sequence[str], room: int, render: Callable[[Sequence[str]], str]) -> str | None:
    """The combined input within `room` tokens with every message's beginning in it: each
    message longer than a common cap is cut to the cap (and says so); the cap is the largest
    that fits (a binary search). None when even MIN_PART_TOKENS of each do not fit."""
    def rendered(cap: int) -> str:
        return render([p if count_tokens(p) <= cap else f"{cut_to_tokens(p, cap)}{INPUT_CUT}" for p in parts])

    def fits(cap: int) -> bool:
        return message_tokens(ChatMessage("user", rendered(cap))) <= room

    low, high = MIN_PART_TOKENS, max(count_tokens(p) for p in parts)
    if not fits(low):
        return None
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(mid) else (low, mid - 1)
    return rendered(low)


def _cut_input(text: str, room: int) -> tuple[str, bool]:
    head = cut_to_tokens(text, max(0, room - message_tokens(ChatMessage("user", INPUT_CUT)) - 1))
    return f"{head}{INPUT_CUT}", True


__all__ = ["Request", "TurnInput", "budget_for", "fit_turn"]
