"""Copilot's held items are durable (issue 17 follow-up): written to `held_memories` in the
flush transaction that holds them, asked about again after a restart whatever the new
mode, kept (not written, not dropped) while the mode is off, and settled exactly once —
a crash between the steps of an answer writes nothing and loses nothing.

The real loop, gates and database; fakes only at the provider seam (HashEmbedder,
ScriptedLLM), as in tests/test_memory_modes.py whose mind builder this reuses."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import numpy as np
import pytest

from src.gates import held_repository, scratch
from src.gates.copilot import QUESTION, split
from src.gates.evaluation import Evaluation, Neighbour
from src.gates.held import listing
from src.gates.matrix import CellDecision
from src.memory.__main__ import run_cli
from src.recall.activation import ActivationResult
from tests.test_memory_modes import SAID, TOPICS, _mind, _settle_background_flush, _turn


async def _held_run(pool, tmp_path, turns: int = 6) -> tuple[object, list[int]]:
    """A copilot mind after five exchanges: the flush held what it was unsure of."""
    mind, _, _ = await _mind(pool, tmp_path, "copilot", turns=turns)
    for n in range(5):
        await _turn(mind, TOPICS[n])
    await _settle_background_flush(mind)
    ids = [r["scratch_id"] for r in await held_repository.held_items(pool)]
    assert len(ids) >= 5 and ids == sorted(mind.gates.exit.confirmations._held)
    return mind, ids


async def _exit_decisions(pool, ids: list[int]) -> list:
    return await pool.fetch("SELECT scratch_id, action, reason FROM gate_decisions "
                            "WHERE gate = 'exit' AND scratch_id = ANY($1) ORDER BY scratch_id", ids)


async def test_held_items_are_written_in_the_flush_transaction_with_their_evaluation(pool, tmp_path):
    mind, ids = await _held_run(pool, tmp_path)
    rows = await pool.fetch("SELECT h.*, s.content, s.flushed_at FROM held_memories h "
                            "JOIN scratch_buffer s ON s.id = h.scratch_id ORDER BY h.scratch_id")
    assert [r["content"] for r in rows][0] == TOPICS[0]
    assert {(r["action"], r["why"], r["embed_model"], r["flush_reason"]) for r in rows} == {
        ("persist", "undecided", "fake-hash-768", "every 5 exchanges")}
    assert all(r["flushed_at"] is None for r in rows)                 # the content stays in scratch
    evaluation = json.loads(rows[0]["evaluation"])
    assert evaluation["cell"]["cell_action"] == "buffer" and evaluation["novelty"] == "novel"
    assert await _exit_decisions(pool, ids) == []                     # decided by nobody yet
    # the same chunk's sure decisions committed with the holding (the mind repeating itself)
    assert {r["action"] for r in await pool.fetch(
        "SELECT action FROM gate_decisions WHERE gate = 'exit'")} == {"skip"}
    # a flush in any mode never evaluates a held row again
    mind.gates.mode.set("autopilot")
    await mind.gates.exit.flush(reason="again")
    assert await _exit_decisions(pool, ids) == []


@pytest.mark.parametrize("mode", ["autopilot", "copilot"])
async def test_after_a_crash_held_items_are_asked_again_with_their_age(pool, tmp_path, mode):
    _, ids = await _held_run(pool, tmp_path)            # no close(): the process died here
    await pool.execute("UPDATE held_memories SET held_at = held_at - interval '2 hours'")
    born = await pool.fetchval("SELECT count(*) FROM memories")

    mind, delivered, _ = await _mind(pool, tmp_path, mode, turns=2)
    await mind.gates.recover()
    assert mind.gates.held_notice() == (f"{len(ids)} memories held for your decision before the restart; "
                                        "I ask about them after my next answer (/held lists them)")
    assert await _exit_decisions(pool, ids) == []       # recovery left them to the guardian
    await _turn(mind, TOPICS[6])
    assert delivered[0] == SAID
    question = delivered[1].splitlines()
    assert question[0] == "Memories I am unsure of:" and question[-1] == QUESTION
    assert question[1] == f"  1. [undecided; from before the restart, held 2 h ago] {TOPICS[0]}"
    # the earlier run's items, and this turn's own line when its flush settled before the question
    listed = len(question) - 2
    assert listed in (len(ids), len(ids) + 1)

    assert await mind.gates.answer_confirmation("1") == f"kept 1, dropped {listed - 1}"
    assert await held_repository.count_held(pool) == 0 and len(mind.gates.exit.confirmations) == 0
    kept = await pool.fetch("SELECT content, (metadata->>'scratch_id')::bigint AS sid FROM memories "
                            "WHERE metadata ? 'scratch_id'")
    assert [(r["content"], r["sid"]) for r in kept] == [(TOPICS[0], ids[0])]
    assert await pool.fetchval("SELECT count(*) FROM memories") == born + 1
    decisions = await _exit_decisions(pool, ids)
    assert [d["action"] for d in decisions] == ["persist"] + ["drop"] * (len(ids) - 1)
    assert decisions[0]["reason"].endswith("undecided: kept by the guardian (copilot)")
    assert await pool.fetchval("SELECT count(*) FROM scratch_buffer WHERE id = ANY($1) AND flushed_at IS NULL",
                               ids) == 0


async def test_off_at_restart_keeps_and_lists_them_without_asking_or_writing(pool, tmp_path):
    _, ids = await _held_run(pool, tmp_path)
    await pool.execute("UPDATE held_memories SET held_at = now() - interval '3 hours'")
    born = await pool.fetchval("SELECT count(*) FROM memories")
    mind, delivered, _ = await _mind(pool, tmp_path, "off", turns=2)
    await mind.gates.recover()
    assert mind.gates.held_notice() == (
        f"{len(ids)} memories held for your decision before the restart; memory mode is off, so they are "
        "kept, not written, and asked about once the mode is copilot or autopilot (/held lists them)")
    await _turn(mind, TOPICS[6])
    assert delivered == [SAID]                                    # not asked while off
    text = (await mind.gates.held_text()).splitlines()
    assert text[0] == f"{len(ids)} memories held for your decision:"
    assert text[1] == f"  scratch #{ids[0]}, held 3 h ago [undecided]: {TOPICS[0]}"
    assert text[-1] == ("memory mode is off: they are kept, not written, and asked about once the mode "
                        "is copilot or autopilot (/memory-mode)")
    # past their TTL, unflushed held rows are still not cleaned away, and a flush writes nothing
    await pool.execute("UPDATE scratch_buffer SET expires_at = now() - interval '1 second'")
    await scratch.clean_expired(pool)
    await mind.gates.exit.flush(reason="off")
    assert [r["scratch_id"] for r in await held_repository.held_items(pool)] == ids
    assert await pool.fetchval("SELECT count(*) FROM memories") == born

    mind.gates.mode.set("copilot")                                # on again: asked after the next answer
    await _turn(mind, TOPICS[7])
    assert delivered[-1].endswith(QUESTION) and delivered[-2] == SAID
    assert await mind.gates.answer_confirmation("n") == f"kept 0, dropped {len(ids)}"
    assert await pool.fetchval("SELECT count(*) FROM memories") == born


async def test_an_answer_given_after_switching_off_writes_nothing(pool, tmp_path):
    mind, ids = await _held_run(pool, tmp_path)
    await _turn(mind, TOPICS[5])
    mind.gates.mode.set("off")
    assert await mind.gates.answer_confirmation("y") == (
        f"memory mode is off, so nothing is written now: the {len(ids)} held item(s) stay held (/held lists "
        "them) and are asked about again once the mode is copilot or autopilot")
    assert await held_repository.count_held(pool) == len(ids)


async def test_a_crash_between_the_steps_of_an_answer_writes_nothing_and_loses_nothing(pool, tmp_path,
                                                                                       monkeypatch):
    mind, ids = await _held_run(pool, tmp_path, turns=8)
    born = await pool.fetchval("SELECT count(*) FROM memories")
    await _turn(mind, TOPICS[5])
    settlement = mind.gates.exit.confirmations.take("y")
    mind.gates.exit.confirmations.reask()
    await _turn(mind, TOPICS[6])                                 # asked again: answer it for real below

    # the memories are inserted and the decisions recorded, then the process "dies"
    # before the scratch rows are marked: one transaction, so nothing of it stays
    async def crash(conn, ids_):
        raise RuntimeError("simulated crash after the memories were written")
    monkeypatch.setattr(scratch, "mark_flushed", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        await mind.gates.answer_confirmation("y")
    assert await pool.fetchval("SELECT count(*) FROM memories") == born
    assert [r["scratch_id"] for r in await held_repository.held_items(pool)] == ids
    assert await _exit_decisions(pool, ids) == []
    assert len(mind.gates.exit.confirmations) == len(ids)
    monkeypatch.undo()

    await _turn(mind, TOPICS[7])                                  # asked again after the failure
    assert await mind.gates.answer_confirmation("y") == f"kept {len(ids)}, dropped 0"
    assert await pool.fetchval("SELECT count(*) FROM memories") == born + len(ids)
    # the same answer again (a retry, a double click): already decided, nothing written twice
    report = await mind.gates.exit.settle(settlement)
    assert report.evaluated == 0 and report.actions == {}
    assert await pool.fetchval("SELECT count(*) FROM memories") == born + len(ids)
    assert [d["action"] for d in await _exit_decisions(pool, ids)] == ["persist"] * len(ids)


async def test_the_cli_lists_held_items_read_only(pool, db_dsn, tmp_path):
    _, ids = await _held_run(pool, tmp_path)
    await pool.execute("UPDATE scratch_buffer SET content = content || E'\\x1b[2J' WHERE id = $1", ids[0])
    await pool.execute("UPDATE held_memories SET held_at = now() - interval '5 minutes'")
    out, err = io.StringIO(), io.StringIO()
    assert await run_cli(["--config", str(tmp_path / "none.yaml"), "held"], out=out, err=err,
                         providers=SimpleNamespace(), env={"DATABASE_URL": db_dsn}) == 0
    lines = out.getvalue().splitlines()
    assert lines[0] == f"{len(ids)} memories held for your decision:"
    assert lines[1] == f"  scratch #{ids[0]}, held 5 min ago [undecided]: {TOPICS[0]}\\x1b[2J"
    assert len(lines) == len(ids) + 1
    out = io.StringIO()
    assert await run_cli(["--config", str(tmp_path / "none.yaml"), "held", "--json"], out=out, err=err,
                         providers=SimpleNamespace(), env={"DATABASE_URL": db_dsn}) == 0
    first = json.loads(out.getvalue().splitlines()[0])
    assert (first["scratch_id"], first["why"], first["action"], first["content"]) == (
        ids[0], "undecided", "persist", TOPICS[0] + "\x1b[2J")
    assert await held_repository.count_held(pool) == len(ids)


def test_listing_of_nothing_and_of_a_flagged_item():
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert listing([], now) == "no memories are held for your decision"
    row = {"scratch_id": 7, "why": "contradiction judged by the language model", "action": "persist_flag",
           "held_at": datetime(2026, 2, 27, 12, 0, tzinfo=UTC), "content": "the sky\nis green\u202e"}
    assert listing([row], now, mode="autopilot") == (
        "1 memory held for your decision:\n"
        "  scratch #7, held 2 days ago [contradiction judged by the language model] (kept, it is stored "
        "flagged as a contradiction): the sky is green\\u202e\n"
        "I ask about it after my next answer (Keep these? y/n/numbers)")


def _evaluation(item, k: int, action: str, cell_action: str, nearest=None):
    vec = np.zeros(768, dtype=np.float32)
    vec[k] = 1.0
    cell = CellDecision("peripheral", "novel", cell_action, action, 0.5, 0.0, False, "moderate",
                        f"peripheral x novel -> {cell_action}")
    return Evaluation(item, vec, ActivationResult(0.1, 0.4, 0.0, 0.0, 0.5), 0.0, 0.4, nearest, "novel",
                      0.0, 0.5, cell=cell, compressed=item.content)


async def test_in_chunk_neighbours_name_the_right_memory_when_part_of_the_chunk_is_held(pool, tmp_path):
    """Item indices in a chunk count the held items too: a reinforce of an earlier item of the
    chunk reaches that item's new memory, and a held item's in-chunk neighbour is stored as
    the memory it became."""
    mind, _, _ = await _mind(pool, tmp_path, "copilot", turns=1)
    ids = await scratch.buffer_pruned(pool, ["held item", "first kept", "second kept", "first kept again"],
                                      "external_user", timedelta(hours=1), 100)
    items = await scratch.pending(pool, limit=10, ids=ids)
    chunk = [_evaluation(items[0], 0, "buffer", "buffer", Neighbour(0.7, "second kept", batch_index=2)),
             _evaluation(items[1], 1, "persist", "persist"),
             _evaluation(items[2], 2, "persist", "persist"),
             _evaluation(items[3], 1, "reinforce", "reinforce", Neighbour(0.99, "first kept", batch_index=1))]
    report = await mind.gates.exit._write(chunk, "test", held=split(chunk)[1])
    assert report.actions == {"held": 1, "persist": 2, "reinforce": 1}
    memory = {r["sid"]: r["id"] for r in await pool.fetch(
        "SELECT id, (metadata->>'scratch_id')::bigint AS sid FROM memories WHERE metadata ? 'scratch_id'")}
    assert await pool.fetchval("SELECT memory_id FROM gate_decisions WHERE scratch_id = $1 AND gate = 'exit'",
                               ids[3]) == memory[ids[1]]
    assert await pool.fetchval("SELECT depth_weight_alpha FROM memories WHERE id = $1", memory[ids[1]]) > 1.0
    stored = json.loads(await pool.fetchval("SELECT evaluation FROM held_memories WHERE scratch_id = $1", ids[0]))
    assert stored["nearest"] == {"similarity": 0.7, "memory_id": memory[ids[2]]}
