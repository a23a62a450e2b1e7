"""The exit gate's pure parts: the 3×3 matrix, the noise floor's rate, the bootstrap floor,
the compressed fallback, and the per-model thresholds."""

from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from src.gates.exit import COMPRESSED_FALLBACK_CHARS
from src.gates.matrix import (
    MATRIX,
    NOISE_ALTERNATIVE,
    BufferRounds,
    bootstrap_floor,
    decide_cell,
    novelty_band,
    novelty_cell,
    relevance_cell,
)
from src.gates.settings import ExitGateSettings, GateSettings, GateThresholds
from src.text import first_sentence

TH = GateThresholds()


@pytest.mark.parametrize(("score", "cell"), [
    (0.61, "core"), (0.6, "peripheral"), (0.45, "peripheral"), (0.3, "peripheral"),
    (0.29, "irrelevant"), (0.0, "irrelevant"), (1.0, "core"),
])
def test_relevance_axis(score, cell):
    assert relevance_cell(score, TH) == cell


@pytest.mark.parametrize(("similarity", "opposed", "cell"), [
    (None, None, "novel"),            # empty store
    (0.95, False, "confirming"),
    (0.86, False, "confirming"),
    (0.85, False, "novel"),           # the related band is kept as novel
    (0.70, False, "novel"),
    (0.95, True, "contradicting"),
    (0.71, True, "contradicting"),
    (0.70, True, "novel"),            # opposition only counts above 0.7
    (0.95, None, "novel"),            # undecided: kept, no claim either way
    (0.30, None, "novel"),
])
def test_novelty_axis(similarity, opposed, cell):
    assert novelty_cell(similarity, opposed, TH) == cell


def test_novelty_band_is_logged_before_any_judgement():
    assert [novelty_band(s, TH) for s in (None, 0.59, 0.6, 0.85, 0.86)] == [
        "novel", "novel", "related", "related", "confirming"]


def test_the_matrix_is_the_plans():
    assert MATRIX == {
        ("core", "confirming"): "reinforce", ("core", "novel"): "persist",
        ("core", "contradicting"): "persist_flag",
        ("peripheral", "confirming"): "skip", ("peripheral", "novel"): "buffer",
        ("peripheral", "contradicting"): "persist",
        ("irrelevant", "confirming"): "drop", ("irrelevant", "novel"): "drop",
        ("irrelevant", "contradicting"): "drop"}


class _Draws(random.Random):
    def __init__(self, value: float):
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.mark.parametrize(("relevance", "novelty"), list(MATRIX))
def test_every_cell_has_its_action_and_its_alternative(relevance, novelty):
    score = {"core": 0.7, "peripheral": 0.5, "irrelevant": 0.1}[relevance]
    quiet = decide_cell(score, novelty, TH, 0.05, _Draws(0.05))
    noisy = decide_cell(score, novelty, TH, 0.05, _Draws(0.0499))
    expected = MATRIX[(relevance, novelty)]
    assert (quiet.relevance, quiet.novelty, quiet.cell_action, quiet.noise_fired) == (
        relevance, novelty, expected, False)
    assert quiet.action == expected
    assert (noisy.cell_action, noisy.noise_fired) == (expected, True)
    # round 1 of 3: a noise "buffer" stays a buffer
    assert noisy.action == NOISE_ALTERNATIVE[expected]


def test_noise_never_destroys():
    assert {a for a in NOISE_ALTERNATIVE.values()} == {"persist", "buffer"}
    assert NOISE_ALTERNATIVE["drop"] == "persist"


@pytest.mark.parametrize("cell", list(MATRIX))
def test_the_noise_floor_fires_at_its_rate(cell):
    rng = random.Random(list(MATRIX).index(cell))
    score = {"core": 0.7, "peripheral": 0.5, "irrelevant": 0.1}[cell[0]]
    n = 20_000
    fired = sum(decide_cell(score, cell[1], TH, 0.05, rng).noise_fired for _ in range(n))
    # sd of the count is 31 at n = 20,000 and p = 0.05; 130 is over 4 sd
    assert abs(fired - 0.05 * n) <= 130, fired


def test_the_last_round_and_expiry_turn_a_buffer_into_persist():
    mid = decide_cell(0.5, "novel", TH, 0.0, _Draws(0.5), rounds=BufferRounds(2, 3))
    last = decide_cell(0.5, "novel", TH, 0.0, _Draws(0.5), rounds=BufferRounds(3, 3))
    expired = decide_cell(0.5, "novel", TH, 0.0, _Draws(0.5), rounds=BufferRounds(1, expired=True))
    assert (mid.action, last.action, expired.action) == ("buffer", "persist", "persist")
    assert last.reason == "peripheral x novel -> buffer; undecided for too long (round 3 of 3) -> persist"
    assert expired.reason == ("peripheral x novel -> buffer; undecided for too long "
                              "(its TTL has passed) -> persist")


def test_decide_cell_uses_one_draw():
    a, b = random.Random(4), random.Random(4)
    decision = decide_cell(0.9, "novel", TH, 0.05, a)
    assert decision.draw == b.random()
    assert a.random() == b.random()


def test_unknown_novelty_is_refused():
    with pytest.raises(ValueError) as err:
        decide_cell(0.5, "similar", TH, 0.0, random.Random(0))
    assert str(err.value) == ("novelty must be one of ('confirming', 'novel', 'contradicting'), "
                              "got 'similar'")


@pytest.mark.parametrize(("source", "maturity", "floor"), [
    ("external_user", 0.0, 0.65), ("external_user", 0.5, 0.325), ("external_user", 1.0, 0.0),
    ("dmn", 0.0, 0.0), ("tool", 0.3, 0.0),
])
def test_bootstrap_floor(source, maturity, floor):
    assert bootstrap_floor(source, maturity, ExitGateSettings()) == pytest.approx(floor)


def test_bootstrap_floor_checks_maturity():
    with pytest.raises(ValueError) as err:
        bootstrap_floor("external_user", 1.5, ExitGateSettings())
    assert str(err.value) == "maturity must be in [0, 1], got 1.5"


@pytest.mark.parametrize(("text", "summary"), [
    ("I love coffee.", "I love coffee."),
    ("I love coffee. It keeps me going.", "I love coffee."),
    ("  many   spaced\twords ", "many spaced words"),
    ("  a line\n\nthen more", "a line"),                # a line break ends the sentence
    ("word " * 40, ("word " * 24).strip() + "…"),    # the limit fell on a space: the word is whole
    ("word " * 23 + "wordy " * 5, ("word " * 23).strip() + "…"),   # inside a word: dropped
    ("x" * 200, "x" * 119 + "…"),
])
def test_compressed_fallback_is_the_first_sentence_within_120_chars(text, summary):
    assert first_sentence(text, COMPRESSED_FALLBACK_CHARS) == summary
    assert len(summary) <= COMPRESSED_FALLBACK_CHARS == 120


def test_thresholds_per_embed_model():
    settings = GateSettings.model_validate({"exit": {"thresholds": {
        "wordllama-l2-supercat-256": {"core": 0.7, "peripheral": 0.5}}}})
    assert settings.exit.thresholds_for("wordllama-l2-supercat-256").core == 0.7
    assert settings.exit.thresholds_for("gemini-embedding-001") == GateThresholds()
    assert set(settings.exit.thresholds) == {"default", "wordllama-l2-supercat-256"}


@pytest.mark.parametrize(("bad", "message"), [
    ({"core": 0.2, "peripheral": 0.5}, "peripheral (0.5) must not exceed core (0.2)"),
    ({"novel": 0.9}, "novel (0.9) must not exceed confirming (0.85)"),
    ({"opposition_no_below": 0.1}, "set both opposition_no_below and opposition_yes_above, or neither"),
    ({"opposition_no_below": 0.2, "opposition_yes_above": 0.1},
     "opposition_no_below (0.2) must not exceed opposition_yes_above (0.1)"),
])
def test_threshold_errors_say_what_is_wrong(bad, message):
    with pytest.raises(ValidationError) as err:
        GateThresholds(**bad)
    assert message in str(err.value)


def test_settings_defaults_match_the_plan():
    s = GateSettings()
    assert (s.entry.short_chars, s.entry.short_skip_rate, s.entry.mechanical_skip_rate) == (10, 0.95, 0.90)
    assert (s.scratch.ttl_hours, s.scratch.flush_every, s.scratch.prune_embed_interval_s) == (24.0, 5, 5.0)
    t = s.exit.thresholds_for("any-model")
    assert (t.core, t.peripheral, t.confirming, t.novel, t.contradicting) == (0.6, 0.3, 0.85, 0.6, 0.7)


def test_confirming_needs_the_same_words_and_the_same_polarity():
    from src.gates.matrix import confirmed_or_novel
    assert confirmed_or_novel("I like jazz.", "I like jazz") == ("confirming", "")
    novel, why = confirmed_or_novel("I like jazz with Mara", "I like jazz")
    assert novel == "novel" and "(mara)" in why
    # no new content word, but a denial of what is stored is not a confirmation
    assert confirmed_or_novel("I do not like jazz", "I like jazz")[0] == "novel"
    assert confirmed_or_novel("I don't like jazz", "I like jazz")[0] == "novel"
    assert confirmed_or_novel("I never liked jazz", "I never liked jazz!")[0] == "confirming"
