"""The scratch buffer's lifecycle (plan §2.9): flush every N exchanges, TTL cleaning,
recovery, shutdown, and exactly-once persistence when a flush fails or races another."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass

import pytest

from src.errors import ProviderUnavailable
from src.gates import scratch
from src.gates.memory_gate import Gates
from src.weights.safety import Safety
from tests.fakes import HashEmbedder
from tests.gate_fakes import ScriptedMetaLLM, gate_settings

TEN = [
    "My grandmother grew tomatoes on her balcony",
    "The violin lesson moved to Thursday evening",
    "We adopted a three-legged cat named Pixel",
    "Rent goes up by forty euros in January",
    "I finally finished reading War and Peace",
    "Our flight to Oslo was delayed by two hours",
    "The dentist said my wisdom teeth are fine",
    "Marta is learning to play chess online",
    "The bakery on Rua Augusta closes at seven",
    "I want to run a half marathon next spring",
]


def _gates(pool, embedder=None, seed=11, **exit_overrides) -> Gates:
    settings = gate_settings(noise_floor=0.0, **exit_overrides)
    return Gates.build(pool, embedder or HashEmbedder(), ScriptedMetaLLM(configured=False), settings,
                       Safety(), rng=random.Random(seed))


async def test_buffer_ten_flush_survivors_persisted_and_expired_cleaned(pool):
    gates = _gates(pool)
    # a row flushed long ago and past its TTL, and one flushed recently
    await pool.execute(
        """INSERT INTO scratch_buffer (content, created_at, expires_at, flushed_at) VALUES
           ('old and flushed', now() - interval '30 hours', now() - interval '6 hours', now() - interval '29 hours'),
           ('recent and flushed', now() - interval '1 hour', now() + interval '23 hours', now())""")
    ids = []
    for text in TEN:
        admitted = await gates.admit(text, exchange=False)
        ids.append(admitted.scratch_id)
    # two items waited past their TTL without a flush (say the process was down a day)
    await pool.execute("UPDATE scratch_buffer SET created_at = now() - interval '25 hours', "
                       "expires_at = now() - interval '1 hour' WHERE id = ANY($1)", ids[:2])

    tasks = []
    for _ in range(5):
        gates.lifecycle.note_exchange()                  # counted as messages arrive
        tasks.append(gates.lifecycle.flush_if_due())     # decided by the loop's store step
    assert tasks[:4] == [None] * 4 and tasks[4] is not None
    await tasks[4]

    # every buffered item was judged, expired ones too: expiry never drops an unseen item
    assert sorted(await pool.fetchval("SELECT array_agg(content) FROM memories")) == sorted(TEN)
    decisions = await pool.fetch("SELECT scratch_id, action, details FROM gate_decisions "
                                 "WHERE gate = 'exit' ORDER BY scratch_id")
    assert [(d["scratch_id"], d["action"]) for d in decisions] == [(i, "persist") for i in ids]
    assert {json.loads(d["details"])["flush"] for d in decisions} == {"every 5 exchanges"}
    # cleaned: flushed rows past their TTL; kept: the rest, all flushed now
    left = await pool.fetch("SELECT content, flushed_at IS NOT NULL AS flushed FROM scratch_buffer ORDER BY id")
    assert [(r["content"], r["flushed"]) for r in left] == [("recent and flushed", True)] + [
        (t, True) for t in TEN[2:]]
    assert await scratch.count_unflushed(pool) == 0


async def test_flush_every_n_exchanges(pool):
    gates = _gates(pool)
    started = []
    for i in range(12):
        await gates.admit(f"{TEN[i % 10]} (said {'once' if i < 10 else 'again'})", exchange=False)
        gates.lifecycle.note_exchange()
        task = gates.lifecycle.flush_if_due()
        started.append(task is not None)
        if task is not None:
            await task
    assert started == [False] * 4 + [True] + [False] * 4 + [True] + [False] * 2
    assert await scratch.count_unflushed(pool) == 2
    report = await gates.shutdown()
    assert (report.evaluated, report.actions) == (2, {"persist": 2})
    assert await scratch.count_unflushed(pool) == 0


async def test_recovery_evaluates_what_a_previous_run_left(pool):
    first_run = _gates(pool)
    for text in TEN[:3]:
        await first_run.admit(text, exchange=False)
    started_at = await pool.fetchval("SELECT now()")
    # the previous run is gone without flushing; a new one starts
    new_run = _gates(pool)
    late = await new_run.admit("Typed right after the restart, not part of the crash", exchange=False)
    report = await new_run.recover(started_at)
    assert (report.evaluated, report.actions) == (3, {"persist": 3})
    assert await pool.fetchval("SELECT flushed_at FROM scratch_buffer WHERE id = $1", late.scratch_id) is None
    reasons = await pool.fetch("SELECT scratch_id, details->>'flush' AS flush FROM gate_decisions "
                               "WHERE gate = 'exit' ORDER BY scratch_id")
    assert [(r["scratch_id"], r["flush"]) for r in reasons] == [(1, "recovery"), (2, "recovery"), (3, "recovery")]


async def test_a_flush_that_fails_inside_its_transaction_writes_nothing(pool):
    gates = _gates(pool)
    for text in TEN[:4]:
        await gates.admit(text, exchange=False)
    await pool.execute("""
        CREATE FUNCTION simulated_crash() RETURNS trigger LANGUAGE plpgsql AS
            $$ BEGIN RAISE EXCEPTION 'simulated crash after the memories were written'; END $$;
        CREATE TRIGGER crash BEFORE INSERT ON gate_decisions FOR EACH ROW
            WHEN (NEW.gate = 'exit') EXECUTE FUNCTION simulated_crash();""")
    with pytest.raises(Exception, match="simulated crash after the memories were written"):
        await gates.exit.flush(reason="doomed")
    # the memories insert rolled back with the decisions: nothing half-done
    assert await pool.fetchval("SELECT count(*) FROM memories") == 0
    assert await scratch.count_unflushed(pool) == 4
    await pool.execute("DROP TRIGGER crash ON gate_decisions")
    report = await gates.exit.flush(reason="retry")
    assert report.actions == {"persist": 4}
    counts = await pool.fetch("SELECT content, count(*) AS n FROM memories GROUP BY content")
    assert sorted((r["content"], r["n"]) for r in counts) == sorted((t, 1) for t in TEN[:4])


@dataclass
class MeetingEmbedder(HashEmbedder):
    """Waits at `barrier` on its first call: both flushes have read the rows before either
    writes, so the race the test is about happens every time, not only under load."""

    barrier: asyncio.Barrier | None = None

    async def embed(self, texts, task_type, titles=None):
        if self.barrier is not None:
            barrier, self.barrier = self.barrier, None
            await barrier.wait()
        return await super().embed(texts, task_type, titles)


async def test_two_racing_flushes_persist_each_item_once(pool):
    ea, eb = MeetingEmbedder(), MeetingEmbedder()
    a, b = _gates(pool, ea, seed=1), _gates(pool, eb, seed=2)
    for text in TEN:
        await a.admit(text, exchange=False)
    ea.barrier = eb.barrier = asyncio.Barrier(2)
    ra, rb = await asyncio.gather(a.exit.flush(reason="a"), b.exit.flush(reason="b"))
    # both scored all ten (their SELECTs ran before either wrote); each row was then
    # claimed by exactly one of them, and what the other scored was thrown away
    assert ra.evaluated + rb.evaluated == 10
    assert ra.claimed_elsewhere + rb.claimed_elsewhere == 10
    assert await pool.fetchval("SELECT count(*) FROM memories") == 10
    assert await pool.fetchval("SELECT count(DISTINCT content) FROM memories") == 10
    assert await pool.fetchval("SELECT count(*) FROM gate_decisions WHERE gate = 'exit'") == 10


class DownEmbedder(HashEmbedder):
    async def embed(self, texts, task_type, titles=None):
        self.calls.append(None)
        raise ProviderUnavailable("embedding service down", provider="fake")


async def test_items_that_cannot_be_embedded_stay_buffered(pool, caplog):
    gates = _gates(pool, embedder=DownEmbedder())
    for text in TEN[:3]:
        await gates.admit(text, exchange=False)
    with caplog.at_level("WARNING", logger="src.gates.exit"):
        report = await gates.exit.flush(reason="test")
    assert (report.evaluated, report.deferred, report.actions) == (0, 3, {})
    assert await scratch.count_unflushed(pool) == 3
    assert caplog.messages == ["exit gate: 3 buffered items could not be embedded and stay buffered "
                               "for the next flush: embedding service down"]


async def test_shutdown_waits_for_a_running_flush(pool):
    gates = _gates(pool)
    for text in TEN[:5]:
        await gates.admit(text)            # counted: the fifth is due
    running = gates.lifecycle.flush_if_due()      # the loop's store step starts the background flush
    assert running is not None and not running.done()
    report = await gates.shutdown()
    assert running.done() and report.evaluated == 0
    assert await pool.fetchval("SELECT count(*) FROM memories") == 5
