"""Loop before escalate (plan §3.5), System 2 escalation (§3.6), the escalations table."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import asyncpg
import pytest

from src.errors import ProviderSkipped, ProviderUnavailable
from src.metacognition.confidence import Confidence, FeelingOfKnowing, score_answer
from src.metacognition.escalation import (
    Asking,
    EscalationThreshold,
    EscalationTriggers,
    Recording,
    Scoring,
    System2Answer,
    complexity,
    loop_before_escalate,
    read_threshold,
    retry_feedback,
    system2_brief,
)
from src.metacognition.escalation_log import (
    EscalationRow,
    escalation_stats,
    record_escalation,
    retry_success_rate,
)
from src.metacognition.threshold import RetryRule
from src.providers.caller import USER
from src.providers.llm_reflex import ReflexLanguageModel
from src.providers.protocols import ChatMessage
from src.recall.relevance import escalation_threshold
from src.recall.store import MemoryStore, NewMemory
from tests.fakes import HashEmbedder
from tests.fakes_llm import ScriptedLLM, fok

FOCUS = "When did Canberra become the capital of Australia?"
MESSAGES = (ChatMessage("user", "hello"), ChatMessage("assistant", "Hi."), ChatMessage("user", FOCUS))
HEDGED = "I'm not sure. Maybe it was 1908? I think so."
HEDGED_AGAIN = "I'm not sure, perhaps 1913, possibly 1927."
CONFIDENT = "Canberra became the capital in 1913.\nConfidence: 0.9"
S2 = {"answer": "Canberra was chosen in 1908, named in 1913; Parliament moved there in 1927.",
      "explanation": "Three dates answer three different questions.", "needed_correction": True,
      "error_type": "conflated events", "correction_pattern": "When a date question has several "
      "plausible events, name each event with its date instead of guessing one."}
THRESHOLD = 0.55


def models(*answers, s2=(S2,), judgement=("PARTIAL", 0.5)):
    s1 = ScriptedLLM(meta=fok(*judgement)).say(*answers)
    return s1, ScriptedLLM(model="scripted-2").answer_structured(*s2)


def scored(text, judgement=("PARTIAL", 0.5)):
    return score_answer(text, FeelingOfKnowing(*judgement))


def test_the_scripted_answers_sit_where_the_tests_need_them() -> None:
    assert scored(HEDGED).composite < scored(HEDGED_AGAIN).composite < THRESHOLD < scored(CONFIDENT).composite


async def test_low_confidence_retries_exactly_once_then_escalates() -> None:
    s1, s2 = models(HEDGED, HEDGED_AGAIN)
    out = await loop_before_escalate(s1, s2, MESSAGES, focus=FOCUS, threshold=THRESHOLD,
                                     asking=Asking(system="SYS"))

    first, retry = s1.of("generate")
    assert [first.purpose, retry.purpose] == ["system1_answer", "system1_retry"]
    assert first.messages == MESSAGES and first.system == "SYS"
    c1, c2 = scored(HEDGED), scored(HEDGED_AGAIN)
    feedback = retry_feedback(FOCUS, c1, THRESHOLD)
    assert retry.messages == (*MESSAGES, ChatMessage("assistant", HEDGED), ChatMessage("user", feedback))
    assert "it hedged 3 times ('i'm not sure', 'maybe', 'i think')" in feedback
    # the cause and a request for the answer, not its score (a small model then wrote about its confidence)
    assert feedback.startswith("[SELF-CHECK] Your reply above may be wrong or incomplete:")
    assert "Do not mention confidence, scores, this check or your earlier reply" in feedback
    [meta] = s1.of("meta_call_structured")
    assert meta.messages == () and FOCUS in meta.question

    [call] = s2.calls
    reason = (f"confidence {c1.composite:.2f} < threshold 0.55, still {c2.composite:.2f} after one retry")
    assert (call.kind, call.purpose, call.schema, call.system) == (
        "generate_structured", "system2_escalation", System2Answer, "SYS")
    # System 2 reviews the better of the two drafts (the retry)
    assert call.messages == (*MESSAGES, ChatMessage("assistant", HEDGED_AGAIN),
                             ChatMessage("user", system2_brief(FOCUS, reason, c2)))
    assert (out.path, out.answer, out.reason) == ("system2", S2["answer"], reason)
    assert (out.retried, out.retry_succeeded, out.escalated, out.system2_ok) == (True, False, True, True)
    assert out.confidence_before == pytest.approx(c1.composite)
    assert out.confidence_after_retry == pytest.approx(c2.composite)
    assert out.triggers.fired() == ["low_confidence"]
    assert out.system2 == System2Answer(**S2)
    assert [p for p, _ in out.results] == ["system1_answer", "system1_retry", "system2_escalation"]
    assert out.tokens == (30, 15)


async def test_a_successful_retry_is_delivered_without_system2() -> None:
    s1, s2 = models(HEDGED, CONFIDENT)
    out = await loop_before_escalate(s1, s2, MESSAGES, focus=FOCUS, threshold=THRESHOLD)
    assert (out.path, out.answer) == ("retry", "Canberra became the capital in 1913.")
    assert (out.retried, out.retry_succeeded, out.escalated, out.system2_ok) == (True, True, False, None)
    assert out.confidence_after_retry == pytest.approx(scored(CONFIDENT).composite)
    assert s2.calls == []


async def test_a_confident_first_answer_is_delivered_as_is() -> None:
    s1, s2 = models(CONFIDENT)
    out = await loop_before_escalate(s1, s2, MESSAGES, focus=FOCUS, threshold=THRESHOLD)
    c = scored(CONFIDENT).composite
    assert (out.path, out.retried, out.escalated) == ("system1", False, False)
    assert out.reason == f"confidence {c:.2f} >= threshold 0.55"
    assert len(s1.of("generate")) == 1 and s2.calls == []


@pytest.mark.parametrize("trigger", ["irreversibility", "identity_touched", "goal_modification"])
async def test_an_always_escalate_trigger_escalates_at_once(trigger) -> None:
    s1, s2 = models(CONFIDENT)
    out = await loop_before_escalate(s1, s2, MESSAGES, focus=FOCUS, threshold=THRESHOLD,
                                     asking=Asking(triggers=EscalationTriggers(**{trigger: True})))
    assert [c.purpose for c in s1.of("generate")] == ["system1_answer"]      # no retry
    assert len(s2.calls) == 1 and s2.calls[0].messages[-2] == ChatMessage("assistant", CONFIDENT)
    assert (out.path, out.retried, out.retry_succeeded, out.escalated) == ("system2", False, None, True)
    assert out.reason == f"always-escalate trigger: {trigger}"
    assert out.confidence_after_retry is None


async def test_two_ordinary_triggers_escalate_without_a_retry() -> None:
    focus = ("First compare the two schemas, then design a migration plan step by step. "
             "What are the risks? Which is cheaper?")
    s1, s2 = models(CONFIDENT, judgement=("UNKNOWN", 0.2))
    out = await loop_before_escalate(s1, s2, (ChatMessage("user", focus),), focus=focus,
                                     threshold=THRESHOLD)
    assert out.triggers.fired() == ["complexity", "novelty_fok_unknown"]
    assert out.reason == "2 triggers: complexity, novelty_fok_unknown"
    assert (out.path, out.retried) == ("system2", False)


async def test_one_ordinary_trigger_with_enough_confidence_is_only_noted() -> None:
    s1, s2 = models(CONFIDENT, judgement=("KNOWN", 0.9))
    out = await loop_before_escalate(s1, s2, MESSAGES, focus=FOCUS, threshold=THRESHOLD,
                                     asking=Asking(triggers=EscalationTriggers(contradiction=True)))
    assert out.path == "system1" and out.reason.endswith("; trigger noted: contradiction")
    assert s2.calls == []


async def test_without_system2_the_best_system1_answer_is_kept() -> None:
    s1 = ScriptedLLM(meta=fok("PARTIAL", 0.5)).say(HEDGED, HEDGED_AGAIN)
    out = await loop_before_escalate(s1, ReflexLanguageModel("no ANTHROPIC_API_KEY"), MESSAGES,
                                     focus=FOCUS, threshold=THRESHOLD)
    assert (out.path, out.answer) == ("system1_fallback", HEDGED_AGAIN)
    assert (out.escalated, out.system2_ok, out.retried, out.retry_succeeded) == (True, False, True, False)
    assert out.reason.endswith("; system2 unavailable (no language model is configured for System 2)")


async def test_a_failing_system2_keeps_system1s_answer_and_says_why() -> None:
    s1, s2 = models(CONFIDENT, s2=(ProviderUnavailable("529 overloaded", provider="anthropic"),))
    out = await loop_before_escalate(s1, s2, MESSAGES, focus=FOCUS, threshold=THRESHOLD,
                                     asking=Asking(triggers=EscalationTriggers(irreversibility=True)))
    assert (out.path, out.answer, out.system2_ok) == ("system1_fallback", "Canberra became the capital in 1913.",
                                                      False)
    assert out.reason == ("always-escalate trigger: irreversibility; system2 failed "
                          "(ProviderUnavailable: 529 overloaded)")


async def test_a_failed_retry_call_counts_as_a_failed_retry() -> None:
    s1, s2 = models(HEDGED, ProviderUnavailable("timeout", provider="scripted"))
    out = await loop_before_escalate(s1, s2, MESSAGES, focus=FOCUS, threshold=THRESHOLD)
    assert (out.path, out.retried, out.retry_succeeded, out.confidence_after_retry) == (
        "system2", True, False, None)
    assert out.reason.endswith("still no answer (retry failed) after one retry")


async def test_system1_in_reflex_mode_raises_and_cancels_the_fok_call() -> None:
    meta = ScriptedLLM(meta=fok("KNOWN", 0.9))
    with pytest.raises(ProviderSkipped, match="no language model is configured"):
        await loop_before_escalate(ReflexLanguageModel("no key"), ReflexLanguageModel("no key"), MESSAGES,
                                   focus=FOCUS, threshold=THRESHOLD, asking=Asking(meta=meta))
    assert meta.calls == []


async def test_an_injected_assess_decides() -> None:
    s1, s2 = models("a", "b")
    seen = []

    def assess(result, fok_):
        seen.append((result.text, fok_.judgement))
        return Confidence(0.9 if result.text == "b" else 0.1, 0.5, None, None)

    out = await loop_before_escalate(s1, s2, MESSAGES, focus=FOCUS, threshold=0.5,
                                     scoring=Scoring(assess=assess))
    assert seen == [("a", "PARTIAL"), ("b", "PARTIAL")]
    assert (out.path, out.answer, out.confidence_before, out.confidence_after_retry) == ("retry", "b", 0.1, 0.9)
    with pytest.raises(ValueError, match=r"threshold must be in \[0, 1\], got 1.2"):
        await loop_before_escalate(s1, s2, MESSAGES, focus=FOCUS, threshold=1.2)


@pytest.mark.parametrize(("triggers", "escalate"), [
    (EscalationTriggers(), False),
    (EscalationTriggers(low_confidence=True), False),
    (EscalationTriggers(complexity=True), False),
    (EscalationTriggers(contradiction=True, complexity=True), True),
    (EscalationTriggers(low_confidence=True, novelty_fok_unknown=True), True),
    (EscalationTriggers(irreversibility=True), True),
    (EscalationTriggers(identity_touched=True), True),
    (EscalationTriggers(goal_modification=True), True),
])
def test_should_escalate_rule(triggers, escalate) -> None:
    assert triggers.should_escalate() is escalate


@pytest.mark.parametrize(("text", "low", "high"), [
    ("what about X?", 0.0, 0.05),
    ("Thanks!", 0.0, 0.05),
    ("Explain why the cache misses.", 0.3, 0.5),
    ("First compare the two schemas, then design a migration plan step by step. "
     "What are the risks? Which is cheaper?", 0.9, 1.0),
    ("Please:\n1. back up the DB\n2. migrate it\n3. verify the counts", 0.6, 0.8),
])
def test_complexity_heuristic(text, low, high) -> None:
    assert low <= complexity(text) <= high


# --- the database side -------------------------------------------------------------------------

async def test_outcome_rows_and_retry_success_rate(pool) -> None:
    store = MemoryStore(pool, HashEmbedder())
    at = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    s1, s2 = models(HEDGED, HEDGED_AGAIN)
    out = await loop_before_escalate(s1, s2, MESSAGES, focus=FOCUS, threshold=THRESHOLD,
                                     recording=Recording(store, source_tag="external_user", now=at))
    row = await pool.fetchrow("SELECT * FROM escalations WHERE id = $1", out.escalation_id)
    assert (row["at"], row["attention_focus"], row["source_tag"], row["threshold"], row["path"]) == (
        at, FOCUS, "external_user", THRESHOLD, "system2")
    assert (row["retried"], row["retry_succeeded"], row["escalated"], row["system2_ok"]) == (True, False, True, True)
    assert row["confidence_before"] == pytest.approx(out.confidence_before)
    assert json.loads(row["triggers"]) == ["low_confidence"]
    assert row["correction_id"] == out.correction_id is not None
    assert json.loads(row["details"])["calls"] == ["system1_answer", "system1_retry", "system2_escalation"]

    s1, s2 = models(HEDGED, CONFIDENT)
    await loop_before_escalate(s1, s2, MESSAGES, focus=FOCUS, threshold=THRESHOLD, recording=Recording(store))
    s1, s2 = models(CONFIDENT)
    await loop_before_escalate(s1, s2, MESSAGES, focus=FOCUS, threshold=THRESHOLD, recording=Recording(store))
    assert await retry_success_rate(pool) == (0.5, 2)
    stats = await escalation_stats(pool)
    assert (stats.decisions, stats.retries, stats.retry_successes, stats.escalations) == (3, 2, 1, 1)
    assert stats.escalation_rate == pytest.approx(1 / 3)


async def test_retry_success_rate_from_rows(pool) -> None:
    assert await retry_success_rate(pool) == (None, 0)

    def row(retried, succeeded, escalated=False):
        return EscalationRow(FOCUS, None, 0.5, 0.3, 0.6 if retried else None, retried, succeeded, escalated,
                             [], True if escalated else None, "retry" if succeeded else "system1", None,
                             "test", {})

    for r in (row(True, True), row(True, True), row(True, False, True), row(False, None), row(False, None)):
        await record_escalation(pool, r)
    rate, n = await retry_success_rate(pool)
    assert (rate, n) == (pytest.approx(2 / 3), 3)
    later = await retry_success_rate(pool, since=datetime(2999, 1, 1, tzinfo=UTC))
    assert later == (None, 0)


async def test_the_table_refuses_inconsistent_rows(pool) -> None:
    bad = EscalationRow(FOCUS, None, 0.5, 0.3, None, False, True, False, [], None, "system1", None, "x", {})
    with pytest.raises(asyncpg.CheckViolationError, match="escalations_retry_consistent"):
        await record_escalation(pool, bad)


async def test_threshold_from_count_and_identity_density(pool) -> None:
    assert await read_threshold(pool) == type(await read_threshold(pool))(0, 0.0, 0.3)
    store = MemoryStore(pool, HashEmbedder())
    await store.store_many([NewMemory("a core value", alpha=4.0, beta=1.0),       # center 0.8
                            NewMemory("another", alpha=9.0, beta=1.0),            # 0.9
                            NewMemory("edge", alpha=7.0, beta=3.0),               # 0.7: not above
                            NewMemory("a passing remark")])                       # 0.2
    reading = await read_threshold(pool)
    assert (reading.total_memories, reading.identity_density) == (4, pytest.approx(0.85))
    assert reading.threshold == pytest.approx(escalation_threshold(4, 0.85))
    assert reading.threshold == pytest.approx(0.3 + 0.5 * (0.004 + 0.85) / 2)


async def test_threshold_is_refreshed_in_the_background_after_refresh_seconds(pool) -> None:
    clock = [100.0]
    cached = EscalationThreshold(pool, refresh_s=60, clock=lambda: clock[0])
    assert (await cached.current()).total_memories == 0
    await MemoryStore(pool, HashEmbedder()).store(NewMemory("something new"))
    clock[0] = 159.0
    assert (await cached.current()).total_memories == 0 and cached.refreshing is None
    clock[0] = 160.0
    # stale: the old reading now, a fresh one once the background read is done
    assert (await cached.current()).total_memories == 0
    await cached.refreshing
    assert (await cached.current()).total_memories == 1
    await cached.aclose()


async def test_a_failed_background_refresh_keeps_the_last_reading(pool, caplog) -> None:
    clock = [0.0]
    cached = EscalationThreshold(pool, refresh_s=1, clock=lambda: clock[0])
    first = await cached.current()
    await pool.execute("ALTER TABLE memory_standing RENAME TO memory_standing_gone")
    clock[0] = 5.0
    await cached.current()
    await cached.refreshing
    assert await cached.current() == first
    assert "escalation threshold refresh failed, keeping 0.300" in caplog.text
    await cached.aclose()


async def test_an_empty_draft_is_shown_as_such() -> None:
    s1, s2 = models("", HEDGED)
    out = await loop_before_escalate(s1, s2, MESSAGES, focus=FOCUS, threshold=THRESHOLD)
    assert out.confidence_before == pytest.approx((0.5 * 0.0 + 0.35 * 0.5) / 0.85)   # no stated confidence
    retry = s1.of("generate")[1]
    assert retry.messages[-2] == ChatMessage("assistant", "(empty reply)")
    assert retry.messages[-1].content.startswith("[SELF-CHECK] Your reply above had no words.")
    assert out.path == "system2"


async def test_a_bare_confidence_line_is_never_a_confident_answer() -> None:
    """A small model answered "Confidence: 0.55" and nothing else; the user was printed nothing.
    Such an answer is retried, and a retry that says something is kept."""
    s1, s2 = models("Confidence: 0.95", CONFIDENT, judgement=("KNOWN", 0.9))
    out = await loop_before_escalate(s1, s2, MESSAGES, focus=FOCUS, threshold=THRESHOLD)
    assert out.path == "retry" and out.answer == "Canberra became the capital in 1913."
    assert [p for p, _ in out.results] == ["system1_answer", "system1_retry"]


async def test_an_answer_that_repeats_the_last_one_word_for_word_is_retried() -> None:
    """A small model answered ten turns with one paragraph: a verbatim repeat of an earlier
    answer is never confident, and a retry that answers the question is kept."""
    parroted = ("I am a large language model created to help, and I follow my guidelines: I do not deceive "
                "my guardian or anyone about what I am or what I did, and I take no action outside myself.")
    messages = (ChatMessage("user", "hello"), ChatMessage("assistant", parroted), ChatMessage("user", FOCUS))
    s1, s2 = models(f"{parroted}\nConfidence: 0.95", CONFIDENT, judgement=("KNOWN", 0.9))
    out = await loop_before_escalate(s1, s2, messages, focus=FOCUS, threshold=THRESHOLD,
                                     asking=Asking(caller=USER))   # repeats count in the user's turns
    assert out.path == "retry" and out.answer == "Canberra became the capital in 1913."


async def test_a_short_earlier_answer_to_another_message_is_a_repeat_and_retried_with_that_cause() -> None:
    """A 1.5B model answered "Where does my sister live?" with its earlier answer to the job
    question, word for word, at 0.90 (issue 38): repeats of any length are caught."""
    earlier = "Remind me, what do I do for a living? I do not have a job."
    messages = (ChatMessage("user", "What is my job?"), ChatMessage("assistant", earlier), ChatMessage("user", FOCUS))
    s1, s2 = models(f"{earlier}\nConfidence: 0.9", CONFIDENT, judgement=("KNOWN", 0.9))
    out = await loop_before_escalate(s1, s2, messages, focus=FOCUS, threshold=THRESHOLD,
                                     asking=Asking(caller=USER))   # repeats count in the user's turns
    assert out.path == "retry" and out.answer == "Canberra became the capital in 1913."
    [_, retry] = s1.of("generate")
    assert "repeats, word for word, what you answered to an earlier, different message" in retry.messages[-1].content
    assert out.reason.startswith("repeat (")


async def test_the_same_short_answer_to_the_same_message_again_is_no_repeat() -> None:
    messages = (ChatMessage("user", FOCUS), ChatMessage("assistant", "I hear you."), ChatMessage("user", FOCUS))
    s1, s2 = models("I hear you.\nConfidence: 0.95", judgement=("KNOWN", 0.9))
    out = await loop_before_escalate(s1, s2, messages, focus=FOCUS, threshold=THRESHOLD)
    assert out.path == "system1" and out.answer == "I hear you."


@pytest.mark.parametrize(("reply", "cause"), [
    ("I'm sorry, but I can't assist with that.", "declined to answer"),
    ("The confidence level of the answer was low because I did not give a complete explanation.",
     "talked about a reply"),
    ("[COGNITIVE STATE] Attention candidates this cycle:", "internal markup"),
])
async def test_a_confident_refusal_meta_answer_or_markup_is_retried_naming_its_cause(reply, cause) -> None:
    """Scored 0.70–0.93 by a small model's token probabilities and delivered (issue 38)."""
    s1, s2 = models(f"{reply}\nConfidence: 0.95", CONFIDENT, judgement=("KNOWN", 0.9))
    out = await loop_before_escalate(s1, s2, MESSAGES, focus=FOCUS, threshold=THRESHOLD)
    assert out.path == "retry" and out.answer == "Canberra became the capital in 1913."
    [_, retry] = s1.of("generate")
    assert cause in retry.messages[-1].content and "Now answer the message itself" in retry.messages[-1].content


# --- §3.5's retry success rate, read back: a retry that rarely helps is not asked ----------------

def _row(retried: bool, succeeded: bool | None) -> EscalationRow:
    return EscalationRow(FOCUS, None, 0.5, 0.3, 0.6 if retried else None, retried, succeeded, not succeeded,
                         [], None, "retry" if succeeded else "system2", None, "test", {})


@pytest.mark.parametrize(("retries", "successes", "pays"), [
    (25, 1, False),        # 4%: below the 10% floor, with enough retries to judge
    (25, 3, True),         # 12%
    (10, 0, True),         # too few retries to judge
])
async def test_the_retry_success_rate_decides_whether_the_retry_is_asked(pool, retries, successes, pays) -> None:
    for i in range(retries):
        await record_escalation(pool, _row(True, i < successes))
    reading = await read_threshold(pool)
    assert (reading.retries, reading.retry_successes, reading.retry_pays) == (retries, successes, pays)


async def test_only_the_newest_decisions_count(pool) -> None:
    for _ in range(25):                                  # an old run of failed retries
        await record_escalation(pool, _row(True, False))
    for _ in range(30):                                  # newer decisions without a retry
        await record_escalation(pool, _row(False, None))
    assert not (await read_threshold(pool)).retry_pays
    assert (await read_threshold(pool, retry=RetryRule(window=30))).retry_pays     # aged out


async def test_without_the_retry_a_weak_draft_goes_to_system2_at_once() -> None:
    s1, s2 = models(HEDGED)
    out = await loop_before_escalate(s1, s2, MESSAGES, focus=FOCUS, threshold=THRESHOLD,
                                     asking=Asking(system="SYS", retry=False))
    assert [c.purpose for c in s1.of("generate")] == ["system1_answer"]        # no system1_retry call
    assert out.path == "system2" and out.escalated
    assert not out.retried and out.retry_succeeded is None
    assert "no retry (retries have rarely reached the threshold lately)" in out.reason


async def test_the_loop_skips_the_retry_when_the_store_says_it_rarely_helps(pool, tmp_path) -> None:
    from tests.test_loop import _mind
    for _ in range(25):
        await record_escalation(pool, _row(True, False))
    s1 = ScriptedLLM().say(HEDGED, HEDGED_AGAIN)
    # a mature store (one memory, maturity at one): the threshold is 0.55, a hedged answer below it
    mind, delivered = await _mind(pool, tmp_path, system1=s1, fok=("PARTIAL", 0.5),
                                  overrides={"agent": {"maturity_memories": 1}})
    await mind.store.store_many([NewMemory("Canberra is in the Australian Capital Territory")])
    await mind.loop.submit("user", FOCUS, now=datetime(2026, 11, 22, 12, 0, tzinfo=UTC))
    while len(mind.loop.queue):
        await mind.loop.cycle(datetime(2026, 11, 22, 12, 0, tzinfo=UTC))
    assert delivered
    assert "system1_retry" not in [c.purpose for c in s1.of("generate")]
    row = await pool.fetchrow("SELECT retried, reason FROM escalations ORDER BY id DESC LIMIT 1")
    assert not row["retried"] and "no retry" in row["reason"]
