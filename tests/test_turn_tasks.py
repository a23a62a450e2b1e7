"""One turn's background tasks (src/loop/turn_tasks.py): its deferred writes in order, settled
before the cycle ends, a failed write costs that bookkeeping, never the turn; and nothing a
turn starts is left running after `cycle()` but the named workers of the mind."""

from __future__ import annotations

import asyncio
import logging

import pytest

from src.db.deferred import Deferred
from src.loop.turn_tasks import TurnTasks
from src.recall.store import MemoryStore, NewMemory
from tests.fakes import HashEmbedder
from tests.fakes_llm import ScriptedLLM
from tests.test_loop import CONFIDENT, _mind


async def test_writes_run_in_the_order_queued_one_at_a_time_and_failures_are_returned():
    done: list[str] = []
    running = 0

    def write(name: str, fail: bool = False):
        async def run() -> None:
            nonlocal running
            running += 1
            assert running == 1, "two writes ran at once"
            await asyncio.sleep(0.01 if name == "a" else 0)
            running -= 1
            if fail:
                raise RuntimeError(f"{name} broke")
            done.append(name)
        return run

    wb = TurnTasks()
    wb.queue(Deferred("first", write("a")), Deferred("second", write("b", fail=True)))
    assert done == [] and wb.pending                          # queued, not started
    wb.start()
    wb.queue(Deferred("third", write("c")))                   # queued after the start: chained
    await wb.settle()
    assert done == ["a", "c"]                                  # the failure did not stop "c"
    assert [(label, str(exc)) for label, exc in wb.failures()] == [("second", "b broke")]
    await wb.settle()
    assert not wb.pending and wb.failures() == []


async def test_lanes_run_side_by_side_and_each_keeps_its_order():
    order: list[str] = []
    both_running = asyncio.Event()
    running: set[str] = set()

    def write(lane: str, name: str):
        async def run() -> None:
            running.add(lane)
            if len(running) == 2:
                both_running.set()
            await asyncio.sleep(0.01)
            order.append(name)
            running.discard(lane)
        return run

    wb = TurnTasks()
    for name in ("w1", "w2", "w3"):
        wb.queue(Deferred(name, write("weights", name), lane="weights"))
    wb.queue(Deferred("c1", write("co-access", "c1"), lane="co-access"))
    wb.start()
    wb.queue(Deferred("c2", write("co-access", "c2"), lane="co-access"))   # chained after c1, not after w3
    await wb.settle()
    assert wb.failures() == []
    assert both_running.is_set()                                  # the two lanes overlapped
    assert [n for n in order if n.startswith("w")] == ["w1", "w2", "w3"]
    assert [n for n in order if n.startswith("c")] == ["c1", "c2"]
    assert order.index("c2") < order.index("w3")                  # c2 did not wait for the weights
    assert not wb.pending


async def test_a_cancelled_settle_lets_the_writes_finish():
    finished = asyncio.Event()

    async def slow() -> None:
        await asyncio.sleep(0.05)
        finished.set()

    wb = TurnTasks()
    wb.queue(Deferred("slow", slow))
    waiter = asyncio.create_task(wb.settle())
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await asyncio.wait_for(finished.wait(), 1)


async def test_the_retrieval_bookkeeping_is_written_when_the_cycle_returns(pool, tmp_path):
    mind, delivered = await _mind(pool, tmp_path, system1=ScriptedLLM().say(CONFIDENT))
    await MemoryStore(pool, HashEmbedder()).store_many([
        NewMemory("The lighthouse lamp is lit every evening at dusk."),
        NewMemory("The lighthouse keeper rows to the village on sundays."),
        NewMemory("Fog horns sound from the lighthouse when the fog rolls in.")])
    await mind.loop.submit("user", "tell me about the lighthouse lamp and the keeper")
    record = await mind.loop.cycle()
    assert delivered and record.retrieval.ids
    # the retrieved were reinforced and touched, their pairs counted, their outcomes kept
    touched = await pool.fetch("SELECT id, access_count FROM memories WHERE id = ANY($1::bigint[])",
                               record.retrieval.ids)
    assert all(r["access_count"] == 1 for r in touched)
    assert await pool.fetchval("SELECT count(*) FROM memory_co_access") >= 1
    assert await pool.fetchval("SELECT count(*) FROM recall_outcomes") == len(record.retrieval.ids)
    assert await pool.fetchval("SELECT count(*) FROM consolidation_log WHERE actor = 'retrieval'") >= 1
    # and the escalation decision (handed back by the answer, src/metacognition/escalation.py)
    assert await pool.fetchval("SELECT count(*) FROM escalations") == 1


async def test_a_failed_escalation_row_costs_that_row_not_the_turn(pool, tmp_path, caplog):
    mind, delivered = await _mind(pool, tmp_path, system1=ScriptedLLM().say(CONFIDENT))
    await pool.execute("ALTER TABLE escalations ADD CONSTRAINT refuse_all CHECK (false) NOT VALID")
    await mind.loop.submit("user", "what time is it at the lighthouse?")
    with caplog.at_level(logging.WARNING):
        record = await mind.loop.cycle()
    assert len(delivered) == 1 and record.output == delivered[0]
    assert await pool.fetchval("SELECT count(*) FROM thought_log") == 1
    assert any("escalation decision" in m and "refuse_all" in m for m in caplog.messages), caplog.messages


async def test_a_failed_bookkeeping_write_costs_the_bookkeeping_not_the_turn(pool, tmp_path, caplog):
    mind, delivered = await _mind(pool, tmp_path)
    await MemoryStore(pool, HashEmbedder()).store_many([
        NewMemory("The lighthouse lamp is lit every evening at dusk."),
        NewMemory("The lighthouse keeper rows to the village on sundays.")])
    # every new recall outcome now violates a constraint: the mutation's transaction fails
    await pool.execute("ALTER TABLE recall_outcomes ADD CONSTRAINT refuse_all CHECK (false) NOT VALID")
    await mind.loop.submit("user", "tell me about the lighthouse lamp and the keeper")
    with caplog.at_level(logging.WARNING):
        record = await mind.loop.cycle()
    assert len(delivered) == 1 and record.retrieval.ids                 # answered from what was recalled
    assert await pool.fetchval("SELECT count(*) FROM thought_log") == 1
    # the mutation is one transaction: nothing of it was kept; the failure was said, once
    assert await pool.fetchval("SELECT count(*) FROM consolidation_log WHERE actor = 'retrieval'") == 0
    assert any("retrieval mutation" in m and "refuse_all" in m for m in caplog.messages), caplog.messages
    # the next cycle runs as usual
    await pool.execute("ALTER TABLE recall_outcomes DROP CONSTRAINT refuse_all")
    await mind.loop.submit("user", "and the lamp at dusk?")
    assert (await mind.loop.cycle()).retrieval.ids
    assert await pool.fetchval("SELECT count(*) FROM recall_outcomes") > 0


async def test_start_after_waits_for_the_read_and_spawned_tasks_are_collected():
    order: list[str] = []
    read_done = asyncio.Event()

    async def read() -> None:
        await read_done.wait()
        order.append("read")

    async def write() -> None:
        order.append("write")

    async def beside() -> None:
        await asyncio.sleep(0)
        raise RuntimeError("its step's to handle")

    tasks = TurnTasks()
    identity = tasks.spawn(read(), "identity read")
    tasks.spawn(beside(), "beside")
    tasks.queue(Deferred("w", write))
    tasks.start_after(identity)
    await asyncio.sleep(0.01)
    assert order == []                                  # the write waits for the read
    read_done.set()
    await tasks.settle()
    assert order == ["read", "write"] and not tasks.pending and tasks.failures() == []


#: the second answer is about the keeper (the same answer to another question is a repeat)
KEEPER = "The keeper rows to the village on sundays. Confidence: 0.95"

#: Tasks that outlive a turn on purpose: the mind's named workers (each owned by its part).
NAMED_WORKERS = ("scratch-flush", "reembed", "rate-limited-embed", "light-consolidation",
                 "deep-consolidation", "layer-", "threshold-refresh", "report-cancelled-call")


async def test_every_task_a_turn_starts_is_collected_by_the_end_of_its_cycle(pool, tmp_path):
    mind, delivered = await _mind(pool, tmp_path, system1=ScriptedLLM().say(CONFIDENT).say(KEEPER))
    await MemoryStore(pool, HashEmbedder()).store_many([
        NewMemory("The lighthouse lamp is lit every evening at dusk."),
        NewMemory("The lighthouse keeper rows to the village on sundays."),
        NewMemory("Fog horns sound from the lighthouse when the fog rolls in.")])
    for text in ("tell me about the lighthouse lamp", "and the keeper?"):
        before = asyncio.all_tasks()
        await mind.loop.submit("user", text)
        record = await mind.loop.cycle()
        assert record.retrieval.ids and record.delivered
        left = [t for t in asyncio.all_tasks() - before if not t.done()]
        assert all(t.get_name().startswith(NAMED_WORKERS) for t in left), [t.get_name() for t in left]
    assert len(delivered) == 2
    # the writes the turn handed back were all done: the retrieved touched, the rows there
    assert await pool.fetchval("SELECT count(*) FROM escalations") == 2
    assert await pool.fetchval("SELECT count(*) FROM recall_outcomes") > 0
    # each line of the turns keeps the focus it was said under, for the exit gate (sql/152):
    # the user's two (stored by the turn's write) and the two answers (admitted with it)
    focus = await pool.fetch("SELECT source_tag, array_length(focus, 1) AS rows FROM scratch_buffer "
                             "WHERE focus IS NOT NULL ORDER BY id")
    assert [r["source_tag"] for r in focus].count("external_user") == 2 and len(focus) == 4
    assert all(r["rows"] >= 1 for r in focus)


async def test_the_alignment_check_reads_the_values_after_the_cycles_queued_writes(pool, tmp_path):
    # milestone 10 asks which memories are self-formed values: a question about weights, so
    # the cycle's queued weight changes must be in first (`settled`). Here the promotion that
    # makes the value self-formed is what is still queued: checked without waiting for it,
    # the answer aligns with nothing; waiting for it, with the value.
    from datetime import UTC, datetime

    from src.loop.attention_queue import Candidate
    from src.loop.inner_life import CycleOutcome

    mind, _ = await _mind(pool, tmp_path)
    inner = mind.loop.aftermath.inner
    value = "Patient explanations help people learn."
    [vid] = await MemoryStore(pool, HashEmbedder()).store_many([NewMemory(value)])
    now = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)

    async def promotion_written() -> None:
        await pool.execute(
            "INSERT INTO consolidation_log (memory_id, operation, actor, reason, requested_delta, applied_delta) "
            "VALUES ($1, 'reinforce', 'promotion', 'identity tier: 10 sightings over 30 days', 5.0, 5.0)", vid)

    winner = Candidate.of("dmn", "What do I care about when I explain things?", enqueued_at=now)
    for settled, reached in ((None, 0), (promotion_written, 1)):
        await inner.after_cycle(CycleOutcome(1, winner, value, "system1", [{"kind": "speak"}], None, None, now),
                                settled=settled)
        assert await pool.fetchval("SELECT count(*) FROM readiness_events WHERE milestone = 10") == reached
    event = await pool.fetchval("SELECT event FROM readiness_events WHERE milestone = 10")
    assert f'"value_id": {vid}' in event
