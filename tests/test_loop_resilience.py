"""The loop through failures (issue 11, Deliver 3–5): delivery once, retries with a
budget, internal impulses dropped with a count while user messages never are."""

from __future__ import annotations

from functools import partial

import asyncpg
import pytest

import src.loop.cycle_log as backlog
from tests.test_loop import _mind


async def test_a_database_error_after_delivery_does_not_answer_twice(pool, tmp_path, monkeypatch):
    mind, delivered = await _mind(pool, tmp_path)
    real = backlog.log_answered_cycle
    failures = []

    async def flaky(*args, **kwargs):
        if not failures:
            failures.append(1)
            raise asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")
        return await real(*args, **kwargs)

    monkeypatch.setattr(backlog, "log_answered_cycle", flaky)
    await mind.loop.submit("user", "the spare key is under the blue flower pot")
    assert await mind.loop.run(burst=True) == 1
    assert len(delivered) == 1
    assert [m.content for m in mind.loop.fifo.messages if m.role == "user"] == [
        "the spare key is under the blue flower pot"]
    assert len(mind.loop.backlog) == 1                       # the cycle's row waits for the database
    assert mind.loop.outage.active
    await mind.loop.submit("user", "and the bike lock code is written in my diary")
    assert await mind.loop.run(burst=True) == 1
    assert len(delivered) == 2 and len(mind.loop.backlog) == 0 and not mind.loop.outage.active
    rows = await pool.fetch("SELECT cycle, attention_focus FROM thought_log ORDER BY id")
    assert [(r["cycle"], r["attention_focus"]) for r in rows] == [
        (1, "the spare key is under the blue flower pot"), (2, "and the bike lock code is written in my diary")]


async def broken(*args, **kwargs):
    raise asyncpg.exceptions.CannotConnectNowError("the database system is starting up")


def _record_pauses(mind, monkeypatch) -> list[float]:
    """The loop's backoff pauses, recorded instead of slept."""
    pauses: list[float] = []

    async def pause(seconds, stop):
        pauses.append(seconds)

    monkeypatch.setattr(mind.loop, "_pause", pause)
    return pauses


async def test_a_cycle_that_keeps_failing_is_retried_with_backoff_then_the_user_is_told(pool, tmp_path, monkeypatch):
    mind, delivered = await _mind(pool, tmp_path, overrides={
        "loop": {"cycle_retries": 2, "retry_backoff_s": 0.01, "retry_backoff_max_s": 0.02}})
    pauses = _record_pauses(mind, monkeypatch)
    monkeypatch.setattr(mind.loop.composing, "cost_line", broken)      # fails after the message was taken
    await mind.loop.submit("user", "please remember the dentist on Friday")
    assert await mind.loop.run(burst=True) == 3
    assert pauses == [0.01, 0.02]                             # doubling, capped
    assert delivered == ["(I could not process your message \"please remember the dentist on Friday\" "
                         "after 3 attempts: the database server is starting up or shutting down "
                         "[CannotConnectNowError: the database system is starting up]. "
                         "It was not kept; please send it again.)"]
    assert len(mind.loop.queue) == 0 and mind.loop.intake.attempts == {}


async def test_user_messages_waiting_together_are_one_turn_and_impulses_are_dropped_first(pool, tmp_path):
    mind, delivered = await _mind(pool, tmp_path, overrides={"loop": {"attention": {"queue_max": 2}}})
    said = ["I moved to Porto in March for work", "my sister Marta visits next month",
            "we plan to walk along the Douro river"]
    for text in said:
        await mind.loop.submit("user", text)
    await mind.loop.submit("dmn", "a stray association about rivers and bridges")
    assert mind.loop.queue.counts()["user"] == 3 and mind.loop.queue.dropped["dmn"] == 1
    assert await mind.loop.run(burst=True) == 1
    assert delivered[0].startswith('(answering 3 messages together: "I moved to Porto in March for work" to '
                                   '"we plan to walk along the Douro river")\n(reflex mode — ')
    focus = await pool.fetchval("SELECT attention_focus FROM thought_log")
    assert focus == "[3 messages from the user, taken together as one turn]\n" + "\n".join(
        f"{i}. {t}" for i, t in enumerate(said, 1))


async def test_a_failure_before_any_input_is_taken_backs_off_instead_of_spinning(pool, tmp_path, monkeypatch):
    mind, delivered = await _mind(pool, tmp_path, overrides={
        "loop": {"retry_backoff_s": 0.01, "retry_backoff_max_s": 0.04}})
    pauses = _record_pauses(mind, monkeypatch)
    monkeypatch.setattr(mind.loop.intake, "embed_pending", broken)
    await mind.loop.submit("user", "the plumber comes on Tuesday morning")
    assert await mind.loop.run(max_cycles=5) == 5
    assert pauses == [0.01, 0.02, 0.04, 0.04, 0.04]
    assert delivered == [] and mind.loop.queue.counts()["user"] == 1    # still waiting, not dropped


async def test_entry_and_exit_gates_draw_from_their_own_generators(pool, tmp_path):
    mind, _ = await _mind(pool, tmp_path)                 # gates.seed = 1
    twin, _ = await _mind(pool, tmp_path)
    assert mind.gates.entry.rng is not mind.gates.exit.rng
    # exit-gate draws (a background flush) do not shift the entry gate's sequence
    mind.gates.exit.rng.random()
    assert [mind.gates.entry.rng.random() for _ in range(3)] == [twin.gates.entry.rng.random() for _ in range(3)]


async def test_the_answered_mark_and_the_cycle_row_commit_together(pool, tmp_path, monkeypatch):
    """A crash (here: the row's insert failing) between marking a message answered and
    writing its cycle must leave neither: the restart then answers it again instead of
    the journal saying "answered" with no cycle that covers it."""
    from src.loop import thought_log
    from src.loop.input_journal import InputJournal
    from src.loop.outage import Outage

    journal = InputJournal(pool, "s1", tmp_path / "spill", outage=Outage(), notify=print)
    (line_id,) = await journal._insert([type("L", (), {"kind": "message", "text": "hello"})()])

    async def crash(*args, **kwargs):
        raise asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")

    monkeypatch.setattr(thought_log, "log_cycle", crash)
    with pytest.raises(asyncpg.exceptions.ConnectionDoesNotExistError):
        await thought_log.log_answered_cycle(pool, partial(journal.answered, [line_id]), "s1", None, None, None,
                                             since=None)
    assert await pool.fetchval("SELECT state FROM input_journal WHERE id = $1", line_id) == "pending"


async def test_a_failing_recall_still_gets_a_reply_that_says_what_is_missing(pool, tmp_path, monkeypatch):
    mind, delivered = await _mind(pool, tmp_path)

    async def broken(*args, **kwargs):
        raise asyncpg.exceptions.CannotConnectNowError("the database system is starting up")

    monkeypatch.setattr(mind.loop.parts.retriever, "search", broken)
    await mind.loop.submit("user", "what did I say about the dentist?")
    assert await mind.loop.run(burst=True) == 1
    assert len(delivered) == 1
    assert ("(Unavailable this cycle, answering without it: memories (the database server is starting up "
            "or shutting down [CannotConnectNowError: the database system is starting up]).)") in delivered[0]
    assert delivered[0].count("no language model is configured") == 1      # said once, not twice


def test_the_reflex_reply_says_no_model_once():
    from src.loop.prompts import reflex_reply

    reply = reflex_reply([], said="no language model is configured: GEMINI_API_KEY not set")
    assert reply.splitlines()[0] == ("(reflex mode — no language model is configured: GEMINI_API_KEY not set; "
                                     "I cannot answer in words.)")


async def test_user_messages_waiting_counts_queued_held_and_in_cycle_messages(pool, tmp_path, monkeypatch):
    mind, delivered = await _mind(pool, tmp_path)
    await mind.loop.submit("user", "first thing about the harbour")
    await mind.loop.submit("user", "second thing about the harbour")
    await mind.loop.submit("dmn", "a stray thought about boats")          # not the user's
    assert mind.loop.user_messages_waiting() == 2
    seen: list[int] = []
    deliver = mind.loop.deliver

    def counting(text):              # at delivery the combined turn is still the cycle's
        seen.append(mind.loop.user_messages_waiting())
        return deliver(text)

    monkeypatch.setattr(mind.loop, "deliver", counting)
    await mind.loop.cycle()
    assert seen == [2] and mind.loop.user_messages_waiting() == 0 and len(delivered) == 1
