"""Composite confidence (plan §2.11): heuristics, verbalized confidence, FOK meta call."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from src.errors import MalformedOutput, ProviderUnavailable
from src.metacognition.calls import (
    FOK_PURPOSE,
    FokAnswer,
    feeling_of_knowing,
)
from src.metacognition.confidence import (
    FeelingOfKnowing,
    composite_confidence,
    fok_value,
    logprob_confidence,
    objective_confidence,
    score_answer,
    strip_verbalized_confidence,
    structural_signals,
    verbalized_confidence,
    weaknesses,
)
from src.metacognition.settings import ConfidenceWeights, MetacognitionSettings
from src.providers.llm_reflex import ReflexLanguageModel
from tests.fakes_llm import ScriptedLLM, fok, result

# The same answer with more and more hedging: confidence must fall at every step.
HEDGE_LADDER = [
    "The capital of Australia is Canberra. It became the capital in 1913.",
    "The capital of Australia is Canberra. I think it became the capital in 1913.",
    "I think the capital of Australia is Canberra. It probably became the capital in 1913.",
    "I'm not sure, but the capital of Australia is probably Canberra. Maybe it became the capital in 1913.",
    "I'm not sure, but maybe the capital is Canberra? I don't know. Perhaps it became the capital in 1913?",
]


def test_more_hedging_means_lower_objective_confidence() -> None:
    scores = [objective_confidence(text)[0] for text in HEDGE_LADDER]
    assert scores[0] == pytest.approx(0.9)   # the heuristic ceiling: plain wording proves nothing more
    assert all(a > b for a, b in zip(scores, scores[1:], strict=False)), scores
    assert scores[-1] < 0.4


@pytest.mark.parametrize(("confident", "hedged"), [
    ("Use a B-tree index on created_at.", "Maybe a B-tree index on created_at might help, I guess."),
    ("Paris.", "Paris? Or maybe Lyon?"),
    ("The function returns None when the key is missing.",
     "The function returns the key. Actually, wait, it returns None. I mean when the key is missing."),
    ("It is 42.", "I don't know, it could be 42."),
])
def test_confident_answers_score_above_hedged_ones(confident, hedged) -> None:
    assert objective_confidence(confident)[0] > objective_confidence(hedged)[0] + 0.15


def test_structural_signals_counts() -> None:
    s = structural_signals("I'm not sure. Maybe it's blue? Actually, it is green. I might be wrong.")
    assert (s["sentences"], s["hedges_strong"], s["hedges_weak"], s["questions"], s["self_corrections"]) == (
        4.0, 2.0, 1.0, 1.0, 1.0)
    assert s["hedge_phrases"] == ["I'm not sure", "Maybe", "I might be wrong"]
    assert s["hedging"] == pytest.approx(1 - math.exp(-2 * 5 / 4))
    assert s["question_rate"] == 0.25
    # the confidence line is not part of the answer's structure
    assert structural_signals("Green.\nConfidence: 0.4")["words"] == 1.0


@pytest.mark.parametrize(("words", "expected", "anomaly"), [
    (40, 40, 0.0), (10, 40, 1.0), (20, 40, math.log(2) / math.log(4)), (160, 40, 1.0), (5, None, 0.0),
])
def test_length_anomaly(words, expected, anomaly) -> None:
    s = structural_signals(" ".join(["word"] * words) + ".", expected)
    assert s["length_anomaly"] == pytest.approx(anomaly)


def test_empty_answer_has_no_confidence() -> None:
    assert objective_confidence("")[0] == 0.0
    assert "it was empty" in weaknesses(score_answer(""))


def test_logprobs_are_the_primary_objective_signal() -> None:
    objective, signals = objective_confidence("Canberra.", mean_logprob=math.log(0.5))
    assert signals["logprob_confidence"] == pytest.approx(0.5)
    assert objective == pytest.approx(0.7 * 0.5 + 0.3 * 0.9)
    assert logprob_confidence(0.2) == 1.0           # rounding noise above 0 is probability 1
    llm_result = result("Canberra.", logprobs=[math.log(0.9), math.log(0.9)])
    assert score_answer(llm_result.text, mean_logprob=llm_result.mean_logprob).signals[
        "logprob_confidence"] == pytest.approx(0.9)


@pytest.mark.parametrize(("text", "value"), [
    ("Canberra.\nConfidence: 0.7", 0.7),
    ("Canberra. (confidence 85%)", 0.85),
    ("Confidence level: 7/10", 0.7),
    ("confidence: 70", 0.7),
    ("I'm 80% sure it's Canberra.", 0.8),
    ("Confidence: 0.9 at first, but on reflection confidence: 0.6", 0.6),   # the last number counts
    ("I'm fairly sure it's Canberra.", 0.75),
    ("I'm pretty confident.", 0.75),
    ("I'm certain.", 0.9),
    ("I'm not sure.", 0.35),
    ("I am not entirely certain.", 0.35),
    ("I think it's Canberra.", 0.6),
    ("I'm sure about the city but I don't know the year.", 0.1),          # the lowest phrase counts
    ("Canberra is the capital.", None),
    ("The confidence interval is wide.", None),
    ("confidence: 250", None),
])
def test_verbalized_confidence_parsing(text, value) -> None:
    assert verbalized_confidence(text) == (None if value is None else pytest.approx(value))


def test_strip_verbalized_confidence() -> None:
    assert strip_verbalized_confidence("Canberra.\nConfidence: 0.8\n") == "Canberra."
    assert strip_verbalized_confidence("Canberra.\n(Confidence: 80%)") == "Canberra."
    assert strip_verbalized_confidence("My confidence: high.") == "My confidence: high."
    # said in words of itself at the end (a 1.5B model, every reply of issue 38's script)
    assert strip_verbalized_confidence("Your gym locker code is 7419. I am confident in my abilities.") \
        == "Your gym locker code is 7419."
    assert strip_verbalized_confidence("You work there. I'm fairly sure of this.\nConfidence: 0.8") == "You work there."
    # about what was asked: kept; all there is: no answer (it was said as the whole reply to three messages)
    assert strip_verbalized_confidence("I am sure of the tea: lapsang.") == "I am sure of the tea: lapsang."
    assert strip_verbalized_confidence("I am confident in my abilities.") == ""


def test_composite_weights() -> None:
    assert composite_confidence(0.8, 0.6, 0.4) == pytest.approx(0.5 * 0.8 + 0.35 * 0.6 + 0.15 * 0.4)
    # a missing signal drops out and the others are renormalised
    assert composite_confidence(0.8, None, 0.4) == pytest.approx((0.5 * 0.8 + 0.15 * 0.4) / 0.65)
    assert composite_confidence(0.8, 0.6, None) == pytest.approx((0.5 * 0.8 + 0.35 * 0.6) / 0.85)
    assert composite_confidence(0.8, None, None) == pytest.approx(0.8)
    custom = ConfidenceWeights(objective=0.2, fok=0.2, verbalized=0.6)
    assert composite_confidence(1.0, 0.0, 0.5, custom) == pytest.approx(0.2 + 0.3)
    with pytest.raises(ValueError, match="needs at least one signal"):
        composite_confidence(None, None, None)
    with pytest.raises(ValueError, match=r"confidence signals must be in \[0, 1\], got 1.5"):
        composite_confidence(1.5, None, None)
    with pytest.raises(ValidationError, match="objective must be > 0"):
        ConfidenceWeights(objective=0)


@pytest.mark.parametrize(("judgement", "confidence", "value"), [
    ("KNOWN", 0.95, 0.95), ("KNOWN", 0.2, 0.6), ("PARTIAL", 0.9, 0.7), ("PARTIAL", 0.5, 0.5),
    ("UNKNOWN", 0.9, 0.35), ("UNKNOWN", 0.1, 0.1),
])
def test_fok_value_follows_the_judgement(judgement, confidence, value) -> None:
    assert fok_value(judgement, confidence) == pytest.approx(value)


def test_score_answer_composes_every_signal() -> None:
    c = score_answer("I think it's Canberra.\nConfidence: 0.6", FeelingOfKnowing("PARTIAL", 0.5))
    objective = objective_confidence("I think it's Canberra.")[0]
    assert c.objective == pytest.approx(objective)
    assert (c.fok, c.verbalized, c.fok_unknown) == (0.5, 0.6, False)
    assert c.composite == pytest.approx(0.5 * objective + 0.35 * 0.5 + 0.15 * 0.6)
    assert c.signals["fok_judgement"] == "PARTIAL"
    unknown = score_answer("Canberra.", FeelingOfKnowing("UNKNOWN", 0.2))
    assert unknown.fok_unknown
    assert any("UNKNOWN" in w for w in weaknesses(unknown))


def test_weaknesses_say_what_was_weak() -> None:
    c = score_answer("Maybe Canberra? Actually, wait. I think Sydney.\nConfidence: 0.3")
    found = weaknesses(c)
    assert found[0] == ("it hedged 2 times ('maybe', 'i think') instead of saying plainly what is "
                        "known and what is not")
    assert found[1] == "it corrected itself mid-answer ('actually', 'wait'); give only the corrected version"
    assert "it answered with questions; answer first, ask at most one clarifying question" in found
    assert "its stated confidence was low (0.30)" in found


async def test_feeling_of_knowing_is_an_isolated_meta_call() -> None:
    llm = ScriptedLLM(meta=fok("PARTIAL", 0.9))
    got = await feeling_of_knowing(llm, "  When did Canberra become the capital?  ")
    assert got == FeelingOfKnowing("PARTIAL", 0.7)
    [call] = llm.calls
    assert (call.kind, call.purpose, call.schema, call.max_tokens) == (
        "meta_call_structured", FOK_PURPOSE, FokAnswer, 200)
    assert call.messages == () and call.system is None
    assert call.question.startswith("Do you know the answer to the question below? Do not answer it.")
    assert call.question.endswith("<<<\nWhen did Canberra become the capital?\n>>>")


async def test_feeling_of_knowing_without_a_model_or_after_a_failure() -> None:
    reflex = await feeling_of_knowing(ReflexLanguageModel("no API key"), "q?")
    assert reflex == FeelingOfKnowing(None, None, "no language model is configured (reflex mode)")
    failing = ScriptedLLM(meta=lambda q, s: ProviderUnavailable("503 from upstream", provider="scripted"))
    got = await feeling_of_knowing(failing, "q?")
    assert (got.value, got.skipped) == (None, "failed: ProviderUnavailable: 503 from upstream")
    malformed = ScriptedLLM(meta=lambda q, s: MalformedOutput("not JSON"))
    assert (await feeling_of_knowing(malformed, "q?")).skipped == "failed: MalformedOutput: not JSON"
    assert (await feeling_of_knowing(ScriptedLLM(), "   ")).skipped == "empty question"


async def test_fok_from_the_meta_call_scores_the_answer_and_is_renormalised_away_without_it() -> None:
    llm = ScriptedLLM(meta=fok("KNOWN", 0.9))
    answer = "Canberra became the capital in 1913.\nConfidence: 0.8"
    c = score_answer(answer, await feeling_of_knowing(llm, "When did Canberra become the capital?"))
    assert (c.fok, c.verbalized, c.objective) == (0.9, 0.8, pytest.approx(0.9))
    assert c.composite == pytest.approx(0.5 * 0.9 + 0.35 * 0.9 + 0.15 * 0.8)
    assert len(llm.of("meta_call_structured")) == 1
    reflex = score_answer(answer, await feeling_of_knowing(ReflexLanguageModel("no key"), "When?"))
    assert reflex.fok is None and not reflex.fok_unknown
    assert reflex.composite == pytest.approx((0.5 * 0.9 + 0.15 * 0.8) / 0.65)
    assert reflex.signals["fok_skipped"] == "no language model is configured (reflex mode)"


def test_settings_defaults() -> None:
    cfg = MetacognitionSettings()
    assert (cfg.weights.objective, cfg.weights.fok, cfg.weights.verbalized) == (0.5, 0.35, 0.15)
    assert (cfg.heuristic_ceiling, cfg.logprob_share, cfg.length_anomaly_ratio) == (0.9, 0.7, 4.0)
