"""The gut's delta log (plan §5.1; issue 15's ≤ 5 ms per cycle): each cycle's delta is written
in the transaction of its thought_log row — no commit of its own. Complete, in order, once;
a failure keeps both rows or neither; a restart writes nothing twice; the outcomes of the
cycle link to its delta; PCA reads what the loop wrote."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import asyncpg

from src.gut import repository as gut_repo
from src.gut.deep_pass import gut_deep_pass
from tests.fakes_llm import ScriptedLLM
from tests.test_loop import HEDGED, _mind

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
_ROWS = """SELECT session_id, cycle, source_tag, {focus} AS focus, xmin::text AS tx
             FROM {table} ORDER BY id"""


async def _rows(pool, table: str) -> list[tuple]:
    focus = "context" if table == "gut_deltas" else "attention_focus"
    return [tuple(r) for r in await pool.fetch(_ROWS.format(focus=focus, table=table))]


def _fail_once_after_writing(monkeypatch, times: int = 1) -> list[int]:
    """write_delta does its write, then the connection 'drops' (`times` times): the cycle's
    transaction is rolled back as a crash before COMMIT would leave it."""
    real, failed = gut_repo.write_delta, []

    async def flaky(db, row):
        delta_id = await real(db, row)
        if len(failed) < times:
            failed.append(delta_id)
            raise asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")
        return delta_id

    monkeypatch.setattr(gut_repo, "write_delta", flaky)
    return failed


async def test_every_cycle_logs_its_delta_in_its_thought_log_transaction_in_order(pool, tmp_path):
    mind, _ = await _mind(pool, tmp_path, session="s-one")
    said = [("user", "the harbour storm damaged the old wall"),
            ("dmn", "I just remembered the blue bicycle in the shed"),
            ("consolidation", "I notice a pattern about storms and repairs"),
            ("scheduled", "time to review what I learned this week")]
    for source, text in said:
        await mind.loop.submit(source, text, now=T0)
    assert await mind.loop.run(burst=True) == 4
    deltas, cycles = await _rows(pool, "gut_deltas"), await _rows(pool, "thought_log")
    assert [d[:4] for d in deltas] == [c[:4] for c in cycles]          # one delta per cycle, same order
    assert [d[1] for d in deltas] == [1, 2, 3, 4] and {d[0] for d in deltas} == {"s-one"}
    assert deltas[0][2:4] == ("external_user", "the harbour storm damaged the old wall")
    assert sorted(d[2] for d in deltas) == sorted(
        ["external_user", "internal_dmn", "internal_consolidation", "internal_scheduled"])
    assert [d[4] for d in deltas] == [c[4] for c in cycles]            # written by the cycle's transaction
    assert len({d[4] for d in deltas}) == 4                             # one transaction per cycle
    last = await pool.fetchrow("SELECT magnitude, action::text FROM gut_deltas ORDER BY id DESC LIMIT 1")
    assert abs(last["magnitude"] - mind.gut.reading.magnitude) < 1e-9
    assert last["action"] == await pool.fetchval("SELECT actions::text FROM thought_log ORDER BY id DESC LIMIT 1")


async def test_a_failed_cycle_write_keeps_neither_row_and_the_retry_writes_both_once(pool, tmp_path, monkeypatch):
    mind, delivered = await _mind(pool, tmp_path)
    failed = _fail_once_after_writing(monkeypatch)
    await mind.loop.submit("user", "the spare key is under the blue flower pot")
    assert await mind.loop.run(burst=True) == 1
    assert len(failed) == 1 and len(delivered) == 1 and len(mind.loop.backlog) == 1
    # the delta was written, then the transaction died before COMMIT: no row of either kind
    assert await pool.fetchval("SELECT count(*) FROM gut_deltas") == 0
    assert await pool.fetchval("SELECT count(*) FROM thought_log") == 0
    await mind.loop.submit("user", "and the bike lock code is written in my diary")
    assert await mind.loop.run(burst=True) == 1
    deltas, cycles = await _rows(pool, "gut_deltas"), await _rows(pool, "thought_log")
    assert [d[1:4] for d in deltas] == [
        (1, "external_user", "the spare key is under the blue flower pot"),
        (2, "external_user", "and the bike lock code is written in my diary")]
    assert [d[4] for d in deltas] == [c[4] for c in cycles] and len(mind.loop.backlog) == 0


async def test_shutdown_writes_the_cycles_still_waiting_for_the_database(pool, tmp_path, monkeypatch):
    mind, _ = await _mind(pool, tmp_path)
    _fail_once_after_writing(monkeypatch)
    await mind.loop.submit("user", "the spare key is under the blue flower pot")
    assert await mind.loop.run(burst=True) == 1 and len(mind.loop.backlog) == 1
    await mind.close()
    assert [d[1:4] for d in await _rows(pool, "gut_deltas")] == [
        (1, "external_user", "the spare key is under the blue flower pot")]
    assert await pool.fetchval("SELECT count(*) FROM thought_log") == 1 and len(mind.loop.backlog) == 0


async def test_shutdown_with_the_database_still_away_says_what_was_not_written(pool, tmp_path, monkeypatch,
                                                                             caplog):
    mind, _ = await _mind(pool, tmp_path)
    _fail_once_after_writing(monkeypatch, times=2)
    await mind.loop.submit("user", "the spare key is under the blue flower pot")
    await mind.loop.run(burst=True)
    with caplog.at_level(logging.WARNING, logger="src.mind"):
        await mind.close()
    assert [r.getMessage() for r in caplog.records if r.name == "src.mind"] == [
        "shutdown: 1 cycle writes not written, the database is away "
        "(connection was closed in the middle of operation)"]
    assert await pool.fetchval("SELECT count(*) FROM gut_deltas") == 0


async def test_a_restart_writes_nothing_twice(pool, tmp_path):
    for session, texts in [("s-a", ["first thought about tea", "second thought about rain", "third about maps"]),
                           ("s-b", ["after the restart: tea again", "after the restart: a map"])]:
        mind, _ = await _mind(pool, tmp_path, session=session)
        for text in texts:
            await mind.loop.submit("user", text)
            await mind.loop.run(burst=True)
        await mind.close()
    deltas = await _rows(pool, "gut_deltas")
    assert [d[:2] for d in deltas] == [("s-a", 1), ("s-a", 2), ("s-a", 3), ("s-b", 1), ("s-b", 2)]
    assert [d[:4] for d in deltas] == [c[:4] for c in await _rows(pool, "thought_log")]


async def test_outcomes_of_a_cycle_link_to_its_delta_and_the_ones_before(pool, tmp_path):
    s1 = ScriptedLLM().say(HEDGED, HEDGED, "Glad it helped.\nConfidence: 0.9")
    s2 = ScriptedLLM(model="scripted-2").answer_structured({
        "answer": "You drink earl grey every morning.", "explanation": "stated earlier",
        "needed_correction": True, "error_type": "hedged on a known fact",
        "correction_pattern": "state remembered preferences plainly"})
    mind, _ = await _mind(pool, tmp_path, system1=s1, system2=s2, fok=("UNKNOWN", 0.1))
    await mind.loop.submit("user", "what do I drink every morning?", now=T0)
    await mind.loop.cycle(T0)
    await mind.loop.submit("user", "thanks, that's right", now=T0 + timedelta(minutes=1))
    await mind.loop.cycle(T0 + timedelta(minutes=1))
    delta = dict(await pool.fetch("SELECT cycle, id FROM gut_deltas"))
    links = {}
    for r in await pool.fetch("SELECT o.kind, l.subject_id FROM outcome_links l JOIN outcomes o ON o.id = l.outcome_id "
                              "WHERE l.subject_kind = 'gut_delta' ORDER BY l.subject_id"):
        links.setdefault(r["kind"], []).append(r["subject_id"])
    # the correction came in cycle 1: its own delta; the feedback in cycle 2: both deltas
    assert links == {"correction": [delta[1]], "feedback": [delta[1], delta[2]]}


async def test_pca_runs_over_the_deltas_the_loop_wrote(pool, tmp_path):
    mind, _ = await _mind(pool, tmp_path, overrides={"gut": {"pca_min_samples": 5}})
    texts = ["the storm broke the greenhouse", "a calm evening with friends", "the violin recital in Lisbon",
             "my sister Marta visits next month", "the bike lock code is in my diary", "we walked along the river"]
    for text in texts:
        await mind.loop.submit("user", text)
        await mind.loop.run(burst=True)
    ids, matrix, valences = await gut_repo.deltas_for_pca(pool, 100)
    assert ids == sorted(ids, reverse=True) and matrix.shape == (6, 768) and valences == [None] * 6
    report = await gut_deep_pass(pool, mind.gut, "fake-hash-768", now=T0)
    assert (report.deltas, report.axes, report.named) == (6, 6, 0)
    assert await pool.fetchval("SELECT count(*) FROM gut_axes WHERE samples = 6") == 6
