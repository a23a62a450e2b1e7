"""Adaptive FIFO of the conversation (plan §3.3): how much history the model sees.

The conversation gets what the other context sections leave
(`ContextBudget.conversation_tokens`, the FIFO's *maximum*). How much of that
maximum is used depends on how intense the moment is:

    intensity = weighted mean of four signals in [0, 1], weights 0.25 each:
        gate score       average exit-gate score of recent items (what matters now)
        System 2 recency 0.5 ** (seconds since System 2 last ran / 600 s); 0 if never
        goal relevance   of the current focus to the active goals
        emotional charge of the current focus

The plan lists the four without ranking them, so they weigh the same; the
weights are settings. The *target* is a fraction of the maximum, piecewise
linear in intensity so a small change never halves the buffer at once:

    intensity < 0.3      30% → 40%   (relaxed, cheap: 30% at 0, 40% at 0.3)
    0.3 ≤ intensity ≤ 0.7  40% → 90%   (normal: 65% at 0.5)
    intensity > 0.7      90%         (deep focus, expensive)

`prune()` acts when the buffer holds more than the target. It removes the
oldest messages until the buffer is at or below `low_water` (0.5) of the target
(a margin, so the next messages do not prune again at once: each prune changes the
conversation's start, which a server's prompt cache re-reads), always keeping
the newest `min_keep` (1) — the input being answered. Before anything leaves,
the pruned messages are handed to `on_pruned` (the exit gate, plan §2.8: last
chance to persist; rate-limited where it is implemented). Only when it returns
are they dropped; if it raises, nothing is dropped, the error is logged and
returned, and the same messages are offered again at the next prune (so the
callback sees a message at least once). Cancellation leaves the buffer intact.

After a prune the result and `needs_identity_reinjection` tell the loop to
re-run context assembly with `refresh_identity=True` (plan §3.3: "re-run dynamic
injection — high-weight identity memories naturally resurface").

Who said what (issue 27). A message's role says who spoke to whom: `user` the user
(or a thought put to the mind, framed as one by src/loop/prompts.py), `assistant`
the mind. An answer the mind gave only to itself (a thought of its own, not said to
the user: source `internal_thought`) would read as said to the user, so the window
marks it (`THOUGHT_MARK`): its `content` is what the model reads, its `words` what
was thought (what the exit gate keeps when it is pruned, never the mark).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from src.context.prompts import THOUGHT_MARK
from src.context.settings import FifoSettings
from src.providers.protocols import ChatMessage
from src.recall.speakers import Speaker, speaker_of
from src.tokens import (
    REPLY_PRIMING_TOKENS,
    count_message_tokens,
    count_message_tokens_off_loop,
    count_tokens,
)

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class IntensitySignals:
    """The four inputs of plan §3.3, each in [0, 1]."""

    gate_score: float = 0.0
    system2_recency: float = 0.0
    goal_relevance: float = 0.0
    emotional_charge: float = 0.0


def system2_recency(last_system2_at: datetime | None, now: datetime,
                    half_life_s: float = 600.0) -> float:
    """1.0 right after a System 2 call, halving every `half_life_s`; 0 if it never ran."""
    if last_system2_at is None:
        return 0.0
    age = max(0.0, (now - last_system2_at).total_seconds())
    return 0.5 ** (age / half_life_s)


def intensity(signals: IntensitySignals, settings: FifoSettings | None = None) -> float:
    """Weighted mean of the signals (each clipped to [0, 1])."""
    cfg = settings or FifoSettings()
    pairs = ((signals.gate_score, cfg.w_gate), (signals.system2_recency, cfg.w_system2),
             (signals.goal_relevance, cfg.w_goal), (signals.emotional_charge, cfg.w_emotion))
    for value, _ in pairs:
        if not math.isfinite(value):
            raise ValueError(f"intensity signals must be finite, got {signals!r}")
    total = sum(w for _, w in pairs)
    return sum(min(1.0, max(0.0, v)) * w for v, w in pairs) / total


def target_fraction(level: float, settings: FifoSettings | None = None) -> float:
    """Share of the FIFO maximum to keep at intensity `level` (bands in the module docstring)."""
    cfg = settings or FifoSettings()
    if not 0.0 <= level <= 1.0:
        raise ValueError(f"intensity must be in [0, 1], got {level!r}")
    if level > cfg.deep_above:
        return cfg.deep_fraction
    if level < cfg.relaxed_below:
        span = cfg.relaxed_max_fraction - cfg.relaxed_min_fraction
        return cfg.relaxed_min_fraction + span * level / cfg.relaxed_below
    span = cfg.deep_fraction - cfg.relaxed_max_fraction
    return cfg.relaxed_max_fraction + span * (level - cfg.relaxed_below) / (
        cfg.deep_above - cfg.relaxed_below)


@dataclass(frozen=True)
class TurnContext:
    """What the model reads ahead of an input (src/loop/turn_context.py): the text, and the
    memories it lists."""

    text: str = ""
    shown: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Message:
    """One conversation message; `tokens` includes its chat framing. `content` is what the
    model reads; `words`, when set, the words themselves (`content` carries a mark or frame)."""

    role: str
    content: str
    tokens: int
    source_tag: str = "external_user"
    at: datetime | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    words: str | None = None
    # What the model read beside this input when it answered it (the turn's memories and
    # state), kept so later requests send it again unchanged: a prompt cache keeps the
    # conversation only while every earlier message reads the same (issue 38). `tokens`
    # counts the words (the FIFO's measure, plan §3.3), `context_tokens` the context; `shown`
    # are the memories it lists (not listed again while it is sent).
    context: str = ""
    shown: frozenset[int] = frozenset()
    context_tokens: int = 0

    def as_chat(self) -> dict[str, str]:
        return {"role": self.role, "content": self.chat.text}

    @functools.cached_property
    def chat(self) -> ChatMessage:
        """The message as a model is sent it (made once: the window sends it every cycle)."""
        return ChatMessage("user" if self.role == "user" else "assistant", self.content, context=self.context)

    @functools.cached_property
    def bare(self) -> ChatMessage:
        """The message without its context (when the request has no room for it)."""
        return ChatMessage("user" if self.role == "user" else "assistant", self.content)

    @property
    def said(self) -> str:
        """The words themselves, without a mark or frame (what the exit gate keeps)."""
        return self.content if self.words is None else self.words

    @property
    def speaker(self) -> Speaker | None:
        return speaker_of(self.source_tag, self.metadata)


def _context_tokens(context: str) -> int:
    """What `context` adds to its message: its tokens and the blank line after it (counted
    alone: the words may be a pasted megabyte, counted off the event loop by `add`)."""
    return count_tokens(f"{context}\n\n") if context else 0


def _without_context(message: Message) -> Message:
    return replace(message, context="", shown=frozenset(), context_tokens=0)


def shown(role: str, content: str, source_tag: str, words: str | None = None) -> tuple[str, str | None]:
    """(what the model reads, the words when they differ): a mind's answer that was only
    thought is marked as a thought; everything else is shown as given."""
    speaker = speaker_of(source_tag)
    if role == "assistant" and speaker is not None and speaker.kind == "thought":
        return THOUGHT_MARK + content, content if words is None else words
    return content, words


@dataclass(frozen=True)
class PruneResult:
    intensity: float
    target_tokens: int
    tokens_before: int
    tokens_after: int
    pruned: list[Message] = field(default_factory=list)
    error: str | None = None        # the callback failed: nothing was dropped

    @property
    def reinject_identity(self) -> bool:
        """Messages left the window: identity injection runs again (plan §3.3)."""
        return bool(self.pruned)


OnPruned = Callable[[Sequence[Message]], Awaitable[Any]]


class AdaptiveFifo:
    """The conversation buffer; oldest first."""

    def __init__(self, max_tokens: int, on_pruned: OnPruned,
                 settings: FifoSettings | None = None):
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens!r}")
        self.max_tokens = max_tokens
        self.on_pruned = on_pruned
        self.settings = settings or FifoSettings()
        self._messages: deque[Message] = deque()
        self._content_tokens = 0
        self._lock = asyncio.Lock()
        self.needs_identity_reinjection = False

    def append(self, role: str, content: str, *, source_tag: str = "external_user",
               at: datetime | None = None, metadata: Mapping[str, Any] | None = None,
               words: str | None = None, context: TurnContext | None = None) -> Message:
        """Add a message at the new end; its token count is taken once, here (or by `add`).
        `words`: the words themselves when `content` is framed; `context`: what the model
        read beside it (`Message.context`)."""
        content, words = shown(role, content, source_tag, words)
        tokens = count_message_tokens([{"role": role, "content": content}]) - REPLY_PRIMING_TOKENS
        return self._push(Message(role, content, tokens, source_tag, at, dict(metadata or {}), words), context)

    async def add(self, role: str, content: str, *, source_tag: str = "external_user",
                  at: datetime | None = None, metadata: Mapping[str, Any] | None = None,
                  words: str | None = None, context: TurnContext | None = None) -> Message:
        """`append`, counting a large message's tokens off the event loop."""
        content, words = shown(role, content, source_tag, words)
        tokens = await count_message_tokens_off_loop([{"role": role, "content": content}]) - REPLY_PRIMING_TOKENS
        return self._push(Message(role, content, tokens, source_tag, at, dict(metadata or {}), words), context)

    def _push(self, message: Message, context: TurnContext | None) -> Message:
        if context is not None and context.text:
            message = replace(message, context=context.text, shown=context.shown,
                              context_tokens=_context_tokens(context.text))
        self._messages.append(message)
        self._content_tokens += message.tokens
        return message

    @property
    def messages(self) -> list[Message]:
        return list(self._messages)

    @property
    def tokens(self) -> int:
        """Tokens of the whole buffer as one chat request (framing and reply priming included)."""
        return REPLY_PRIMING_TOKENS + self._content_tokens

    def __len__(self) -> int:
        return len(self._messages)

    def target_tokens(self, level: float) -> int:
        return int(self.max_tokens * target_fraction(level, self.settings))

    def window(self, max_tokens: int | None = None) -> list[Message]:
        """The newest messages that fit in `max_tokens` (default: the maximum), oldest first.

        For the model call: even when pruning is failing and the buffer has grown
        past its maximum, the prompt still fits.
        """
        limit = self.max_tokens if max_tokens is None else max_tokens
        used, out = REPLY_PRIMING_TOKENS, []
        for message in reversed(self._messages):
            if used + message.tokens > limit:
                break
            used += message.tokens
            out.append(message)
        return out[::-1]

    def drop(self, holds: Callable[[str], bool]) -> int:
        """Remove every message whose text `holds` says must go (the guardian forgot its
        words, src/erasure/): gone at once, never pruned into a memory. How many.
        A message whose words stay but whose context lists forgotten words keeps its
        words without that context (a prompt cache re-reads the window once)."""
        kept = [m for m in self._messages if not holds(m.content)]
        dropped = len(self._messages) - len(kept)
        bare = [_without_context(m) if m.context and holds(m.context) else m for m in kept]
        if dropped or any(a is not b for a, b in zip(bare, kept, strict=True)):
            self._messages = deque(bare)
            self._content_tokens = sum(m.tokens for m in bare)
        return dropped

    def clear(self) -> int:
        """Remove every message; how many (a forget whose words this process cannot know)."""
        return self.drop(lambda _: True)

    def identity_reinjected(self) -> None:
        """The loop re-ran identity injection; clear the flag."""
        self.needs_identity_reinjection = False

    async def prune(self, level: float) -> PruneResult:
        """Prune to the target for intensity `level`; see the module docstring."""
        async with self._lock:
            target = self.target_tokens(level)
            before = self.tokens
            if before <= target:
                return PruneResult(level, target, before, before)
            goal = int(target * self.settings.low_water)
            chosen: list[Message] = []
            left = before
            prunable = len(self._messages) - self.settings.min_keep
            for message in self._messages:
                if left <= goal or len(chosen) >= prunable:
                    break
                chosen.append(message)
                left -= message.tokens
            if not chosen:
                return PruneResult(level, target, before, before)
            try:
                await self.on_pruned(list(chosen))
            except Exception as exc:
                log.warning("exit gate failed on %d pruned messages; keeping them (nothing lost), "
                            "will offer them again at the next prune: %s", len(chosen), exc)
                return PruneResult(level, target, before, before,
                                   error=f"{type(exc).__name__}: {exc}")
            for message in chosen:
                # only prune() removes and it holds the lock, so the head is `chosen`
                removed = self._messages.popleft()
                assert removed is message
                self._content_tokens -= removed.tokens
            self.needs_identity_reinjection = True
            log.info("pruned %d messages (%d -> %d tokens, target %d at intensity %.2f)",
                     len(chosen), before, self.tokens, target, level)
            return PruneResult(level, target, before, self.tokens, chosen)


__all__ = ["AdaptiveFifo", "FifoSettings", "IntensitySignals", "Message", "PruneResult", "TurnContext",
           "intensity", "system2_recency", "target_fraction"]
