"""How much text a model takes at once, and the one guard in front of it (issue 27).

With llama.cpp's server at 4,096 tokens every reply failed once the conversation outgrew it
("request (4387 tokens) exceeds the available context size (4096 tokens)"): the budget
assumed 128k. Each language model now carries a `ContextWindow`:

- its size and where that number came from: `providers.llm.context_window` (per system),
  what the endpoint says (src/providers/context_probe.py), or the provider's known window
  (`KNOWN_WINDOWS`; a provider not listed: `UNSTATED_WINDOW`, the plan's 128k);
- a margin on our counts: src/tokens.py counts like cl100k and the model's tokenizer
  differs (a 32k-vocabulary one, Llama 2 or Mistral, counts more than ours; notes.md).
  It is `providers.llm.token_margin`, raised when the endpoint's own counts
  (`usage.prompt_tokens`) say ours run short: `HEADROOM` above the largest ratio of the last
  `OBSERVED` replies of at least `MIN_OBSERVED` tokens (smaller ones are mostly
  chat-template tokens). Never lowered by them: Ollama counts only the tokens its cache did
  not hold, and truncates instead of refusing. An endpoint that says a request was too
  long and by how much (llama.cpp, Gemini, Anthropic, OpenAI and vLLM wording:
  `learn_from`) teaches it the same way.

`fit` is the last line before a request is sent (`ResilientLanguageModel`): our count of
the system prompt and messages times the margin, plus the reply's max tokens, must stay
within the window. Over it, the request loses its oldest history — the messages before the
first pinned one (the loop pins the input it answers; `ChatMessage.pinned`) — and when
that is not enough, or nothing is pinned, it is refused with `ContextOverflow` and never
sent. The pinned message and everything after it are never dropped.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from src.errors import ContextOverflow
from src.providers.protocols import ChatMessage
from src.tokens import REPLY_PRIMING_TOKENS, count_message_tokens

#: Input windows the providers publish for their models (Gemini 2.5 Flash Lite: 1,048,576;
#: Claude Sonnet 4.5: 200,000). An OpenAI-compatible endpoint that says nothing is taken at
#: 4,096, the default of llama.cpp's server and of Ollama below 24 GiB of VRAM: too small
#: costs history, too large costs every reply.
KNOWN_WINDOWS = {"gemini": 1_048_576, "anthropic": 200_000, "openai_compat": 4_096}
UNSTATED_WINDOW = 128_000
#: A reply may take at most this share of the window (max_output_tokens is capped to it).
REPLY_SHARE = 0.25
DEFAULT_MARGIN = 1.3
HEADROOM, OBSERVED, MIN_OBSERVED = 1.10, 20, 256

# How endpoints say a request was too long, as (its count, its window):
# llama.cpp "request (4387 tokens) exceeds the available context size (4096 tokens)";
# Gemini "The input token count (X) exceeds the maximum number of tokens allowed (Y)";
# Anthropic "prompt is too long: X tokens > Y maximum"; OpenAI and vLLM (window first)
# "maximum context length is Y tokens. However, you requested X tokens".
_SAID_COUNT_WINDOW = (
    re.compile(r"\((\d+) tokens\) exceeds the available context size \((\d+) tokens\)"),
    re.compile(r"input token count \((\d+)\) exceeds the maximum number of tokens allowed \((\d+)\)",
               re.IGNORECASE),
    re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum", re.IGNORECASE),
)
_OPENAI = re.compile(r"maximum context length is (\d+) tokens.*?(?:requested|resulted in) (\d+) tokens",
                     re.IGNORECASE | re.DOTALL)
_SAID_TOO_LONG = re.compile(r"context (?:size|length|window)", re.IGNORECASE)


class ContextWindow:
    """One model's window in tokens, and the margin our counts need against its tokenizer."""

    def __init__(self, tokens: int, source: str, margin: float = DEFAULT_MARGIN):
        if tokens < 1:
            raise ValueError(f"a context window needs at least one token, got {tokens!r}")
        if margin < 1:
            raise ValueError(f"the token margin must be >= 1, got {margin!r}")
        self.tokens = tokens
        self.source = source
        self.initial_margin = margin
        self._ratios: deque[float] = deque(maxlen=OBSERVED)

    @classmethod
    def known(cls, provider: str, margin: float = DEFAULT_MARGIN) -> ContextWindow:
        """The provider's published window, or `UNSTATED_WINDOW` for one not listed."""
        if provider in KNOWN_WINDOWS:
            return cls(KNOWN_WINDOWS[provider], f"the known window of {provider}", margin)
        return cls(UNSTATED_WINDOW, f"{provider} states none; the plan's 128k", margin)

    def describe(self) -> str:
        return f"{self.tokens:,} tokens ({self.source}; our counts × {self.margin:.2f})"

    @property
    def margin(self) -> float:
        return max(self.initial_margin, HEADROOM * max(self._ratios, default=0.0))

    def observe(self, counted: int, actual: int) -> None:
        """The endpoint counted `actual` prompt tokens where we counted `counted`."""
        if counted >= MIN_OBSERVED and actual > 0:
            self._ratios.append(actual / counted)

    def learn_from(self, error: str, counted: int) -> bool:
        """Whether `error` is the endpoint saying the request exceeded its context; what it
        says (its count, its window) is kept. Without numbers the margin grows by a quarter."""
        said = next((m for p in _SAID_COUNT_WINDOW if (m := p.search(error)) is not None), None)
        if said is not None:
            actual, window = int(said.group(1)), int(said.group(2))
        elif (said := _OPENAI.search(error)) is not None:
            window, actual = int(said.group(1)), int(said.group(2))
        elif _SAID_TOO_LONG.search(error) and re.search(r"exceed|too long|maximum", error, re.IGNORECASE):
            self._ratios.append(self.margin * 1.25 / HEADROOM)
            return True
        else:
            return False
        if counted > 0:
            self._ratios.append(actual / counted)
        if 0 < window < self.tokens:
            self.tokens, self.source = window, "the endpoint's refusal"
        return True

    def prompt_limit(self, reply_tokens: int) -> int:
        """Our count a prompt may reach so that it, with the margin, and the reply fit."""
        return max(0, math.floor((self.tokens - reply_tokens) / self.margin))

    def reply_cap(self, max_output_tokens: int) -> int:
        """`max_output_tokens`, at most `REPLY_SHARE` of the window."""
        return max(1, min(max_output_tokens, int(self.tokens * REPLY_SHARE)))


def _framed(role: str, content: str) -> int:
    return count_message_tokens([{"role": role, "content": content}]) - REPLY_PRIMING_TOKENS


def message_tokens(message: ChatMessage) -> int:
    """Our count of one message with its chat framing (no reply priming)."""
    return _framed(message.role, message.text)


def count_request(system: str | None, messages: Sequence[ChatMessage]) -> int:
    """Our count of a whole request: the system prompt as a message, every message, the priming."""
    total = REPLY_PRIMING_TOKENS + sum(message_tokens(m) for m in messages)
    return total + (_framed("system", system) if system else 0)


@dataclass(frozen=True)
class Fitted:
    """A request that fits: its messages, how many old ones were dropped, our count of it."""

    messages: tuple[ChatMessage, ...]
    dropped: int
    counted: int


def fit(window: ContextWindow, system: str | None, messages: Sequence[ChatMessage], max_tokens: int,
        *, what: str) -> Fitted:
    """`messages` within `window` with a reply of `max_tokens` (module docstring);
    ContextOverflow, naming `what`, when even the pinned part does not fit."""
    messages = tuple(messages)
    limit = window.prompt_limit(max_tokens)
    costs = [message_tokens(m) for m in messages]
    counted = count_request(system, ()) + sum(costs)
    if counted <= limit:
        return Fitted(messages, 0, counted)
    droppable = next((i for i, m in enumerate(messages) if m.pinned), 0)
    k = 0
    while k < droppable and (counted > limit or messages[k].role == "assistant"):
        # past the limit: oldest first; then a conversation still opens with a user turn
        counted -= costs[k]
        k += 1
    if counted > limit:
        raise ContextOverflow(
            f"{what}: the request is ~{window.margin * counted:,.0f} tokens with a reply of up to "
            f"{max_tokens:,}, over the context window of {window.describe()}; not sent")
    return Fitted(messages[k:], k, counted)


def window_of(llm: object) -> ContextWindow | None:
    """The model's window; None for one that states none (reflex mode, a test double)."""
    window = getattr(llm, "window", None)
    return window if isinstance(window, ContextWindow) else None


def room_of(llm: object, **call: object) -> int | None:
    """`ResilientLanguageModel.room` of `llm` for a call described by `call` (system, schema,
    meta, max_tokens): our count its messages may take. None: the model states no window."""
    room = getattr(llm, "room", None)
    return room(**call) if window_of(llm) is not None and callable(room) else None


def most_that_fit(llm: object, count: int, render: Callable[[int], str], **call: object) -> int:
    """The largest k <= `count` whose question `render(k)` (growing with k), sent as the one
    message of a call described by `call` (see `room_of`), fits the window of `llm`; `count`
    when the model states no window, 0 when not even one fits. For a caller that asks about
    many items at once: as many as the window holds (the newest, the most relevant)."""
    room = room_of(llm, **call)
    if room is None or count <= 0:
        return max(0, count)

    def fits(k: int) -> bool:
        return message_tokens(ChatMessage("user", render(k))) <= room

    if fits(count):
        return count
    lo, hi = 0, count          # fits(lo) (nothing asked) and not fits(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


__all__ = ["DEFAULT_MARGIN", "KNOWN_WINDOWS", "UNSTATED_WINDOW", "ContextWindow", "Fitted",
           "count_request", "fit", "message_tokens", "most_that_fit", "room_of", "window_of"]
