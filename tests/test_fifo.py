"""Adaptive FIFO (plan §3.3): intensity bands, pruning through the exit gate, nothing lost."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from src.context.fifo import (
    AdaptiveFifo,
    IntensitySignals,
    TurnContext,
    intensity,
    system2_recency,
    target_fraction,
)
from src.context.settings import FifoSettings
from src.tokens import REPLY_PRIMING_TOKENS, count_message_tokens

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("level", "fraction"), [
    (0.0, 0.30), (0.15, 0.35), (0.29, 0.30 + 0.10 * 0.29 / 0.3),   # relaxed: 30% → 40%
    (0.3, 0.40), (0.5, 0.65), (0.6, 0.775), (0.7, 0.90),           # normal: 40% → 90%
    (0.71, 0.90), (0.9, 0.90), (1.0, 0.90),                         # deep focus: 90%
])
def test_target_fraction_bands(level, fraction):
    assert target_fraction(level) == pytest.approx(fraction)


def test_target_fraction_is_continuous_and_monotone():
    levels = [i / 1000 for i in range(1001)]
    fractions = [target_fraction(x) for x in levels]
    assert all(b >= a for a, b in zip(fractions, fractions[1:], strict=False))
    assert max(b - a for a, b in zip(fractions, fractions[1:], strict=False)) < 0.002
    with pytest.raises(ValueError, match=r"intensity must be in \[0, 1\], got 1.5"):
        target_fraction(1.5)


@pytest.mark.parametrize(("signals", "expected"), [
    (IntensitySignals(), 0.0),
    (IntensitySignals(gate_score=1.0), 0.25),
    (IntensitySignals(0.8, 0.4, 0.6, 0.2), 0.5),
    (IntensitySignals(1.0, 1.0, 1.0, 0.0), 0.75),
    (IntensitySignals(2.0, -1.0, 1.0, 1.0), 0.75),         # clipped to [0, 1]
])
def test_intensity_is_the_weighted_mean_of_the_four_signals(signals, expected):
    assert intensity(signals) == pytest.approx(expected)


def test_intensity_weights_are_settings():
    only_emotion = FifoSettings(w_gate=0, w_system2=0, w_goal=0, w_emotion=2)
    assert intensity(IntensitySignals(1, 1, 1, 0.3), only_emotion) == pytest.approx(0.3)
    with pytest.raises(ValueError, match="at least one intensity weight must be > 0"):
        FifoSettings(w_gate=0, w_system2=0, w_goal=0, w_emotion=0)


def test_system2_recency_halves_every_half_life():
    assert system2_recency(None, NOW) == 0.0
    assert system2_recency(NOW, NOW) == 1.0
    assert system2_recency(NOW - timedelta(seconds=600), NOW) == pytest.approx(0.5)
    assert system2_recency(NOW - timedelta(seconds=1800), NOW, 600) == pytest.approx(0.125)


class Gate:
    """Stands in for the exit gate: records every batch it is handed."""

    def __init__(self, fail: Exception | None = None):
        self.batches: list[list] = []
        self.fail = fail

    async def __call__(self, messages):
        if self.fail is not None:
            raise self.fail
        self.batches.append(list(messages))


def _fill(fifo: AdaptiveFifo, fraction: float) -> list:
    """Append numbered messages until the buffer holds `fraction` of its maximum."""
    added = []
    i = 0
    while fifo.tokens < fraction * fifo.max_tokens:
        role = "user" if i % 2 == 0 else "assistant"
        added.append(fifo.append(role, f"message {i}: " + "word " * 20))
        i += 1
    return added


def test_token_count_matches_a_chat_request():
    fifo = AdaptiveFifo(1000, Gate())
    fifo.append("user", "hello there, how are you?")
    fifo.append("assistant", "Fine, thanks.")
    assert fifo.tokens == count_message_tokens([m.as_chat() for m in fifo.messages])
    assert AdaptiveFifo(10, Gate()).tokens == REPLY_PRIMING_TOKENS


async def test_fill_to_90_percent_then_prune_hands_exactly_the_pruned_messages_to_the_gate():
    gate = Gate()
    fifo = AdaptiveFifo(2000, gate)
    added = _fill(fifo, 0.9)
    before = fifo.tokens
    assert 1800 <= before < 1800 + added[0].tokens

    result = await fifo.prune(0.5)                  # normal intensity: target 65% = 1300

    assert result.target_tokens == 1300
    assert result.tokens_before == before
    goal = int(1300 * FifoSettings().low_water)     # low water: 650 (0.5: a prune changes the cached start seldom)
    # the oldest messages, and no more than needed to get under the low-water mark
    k = len(result.pruned)
    assert result.pruned == added[:k]
    assert before - sum(m.tokens for m in added[:k]) <= goal
    assert before - sum(m.tokens for m in added[:k - 1]) > goal
    assert gate.batches == [added[:k]]              # the exit gate saw exactly those, once
    assert fifo.messages == added[k:]
    assert result.tokens_after == fifo.tokens <= goal
    assert result.reinject_identity is True
    assert fifo.needs_identity_reinjection is True
    fifo.identity_reinjected()
    assert fifo.needs_identity_reinjection is False

    again = await fifo.prune(0.5)                   # under the target: nothing to do
    assert again.pruned == [] and again.reinject_identity is False
    assert gate.batches == [added[:k]]


async def test_deep_focus_keeps_90_percent_relaxed_keeps_a_third():
    deep, relaxed = Gate(), Gate()
    a, b = AdaptiveFifo(2000, deep), AdaptiveFifo(2000, relaxed)
    _fill(a, 0.85)
    _fill(b, 0.85)
    assert (await a.prune(0.8)).pruned == []        # 85% < 90%: deep focus keeps it all
    result = await b.prune(0.1)                     # relaxed: 30% + 0.1/0.3·10% = 33.3%
    assert result.target_tokens == int(2000 * (0.30 + 0.10 / 3))
    assert b.tokens <= int(result.target_tokens * 0.9)
    assert deep.batches == [] and len(relaxed.batches) == 1


async def test_a_failing_exit_gate_loses_nothing_and_the_messages_are_offered_again():
    gate = Gate(fail=RuntimeError("exit gate down"))
    fifo = AdaptiveFifo(1000, gate)
    added = _fill(fifo, 0.9)
    before = fifo.tokens

    result = await fifo.prune(0.2)

    assert result.error == "RuntimeError: exit gate down"
    assert result.pruned == [] and result.reinject_identity is False
    assert fifo.messages == added and fifo.tokens == before
    assert fifo.needs_identity_reinjection is False

    gate.fail = None
    retry = await fifo.prune(0.2)
    assert retry.error is None
    assert gate.batches == [retry.pruned] and retry.pruned == added[:len(retry.pruned)]


async def test_cancelled_pruning_keeps_every_message():
    started = asyncio.Event()

    async def slow_gate(messages):
        started.set()
        await asyncio.sleep(3600)

    fifo = AdaptiveFifo(1000, slow_gate)
    added = _fill(fifo, 0.9)
    task = asyncio.create_task(fifo.prune(0.0))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert fifo.messages == added


async def test_messages_arriving_while_the_gate_runs_are_kept():
    fifo: AdaptiveFifo

    async def gate(messages):
        fifo.append("user", "arrived during pruning")

    fifo = AdaptiveFifo(1000, gate)
    added = _fill(fifo, 0.9)
    result = await fifo.prune(0.0)
    assert fifo.messages[-1].content == "arrived during pruning"
    assert fifo.messages[:-1] == added[len(result.pruned):]
    assert fifo.tokens == REPLY_PRIMING_TOKENS + sum(m.tokens for m in fifo.messages)


async def test_the_newest_message_is_never_pruned_and_the_window_still_fits():
    gate = Gate()
    fifo = AdaptiveFifo(100, gate)
    old = fifo.append("user", "short")
    huge = fifo.append("user", "word " * 400)       # alone over the maximum
    result = await fifo.prune(1.0)
    assert result.pruned == [old] and fifo.messages == [huge]
    assert fifo.window() == []                      # too big for any prompt: the caller decides
    small = fifo.append("assistant", "ok")
    assert fifo.window() == [small]
    assert fifo.window(10_000) == [huge, small]


def test_a_message_keeps_its_context_apart_from_its_words_and_a_forget_strips_it():
    """The context an input was answered with rides with it (src/loop/turn_context.py): the
    FIFO measures the words (plan §3.3), the request sends both; forgetting words a context
    lists takes the context, not the user's message."""
    fifo = AdaptiveFifo(2000, Gate())
    bare = fifo.append("user", "where does my sister live?")
    held = fifo.append("user", "where does my sister live?",
                       context=TurnContext("- [episodic] My sister lives in Porto.", frozenset({7})))
    assert held.tokens == bare.tokens and held.context_tokens > 0 and held.shown == frozenset({7})
    assert held.chat.text == "- [episodic] My sister lives in Porto.\n\nwhere does my sister live?"
    assert held.bare.text == "where does my sister live?" and held.chat.content == held.bare.content
    assert fifo.drop(lambda text: "porto" in text.lower()) == 0      # the words stay
    [_, kept] = fifo.messages
    assert (kept.context, kept.shown, kept.context_tokens, kept.content) == ("", frozenset(), 0, held.content)
    assert fifo.drop(lambda text: "sister" in text) == 2
