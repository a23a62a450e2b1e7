"""Issue 26, crash and outage rows: a reply is printed once across a SIGKILL at any point
(the journal's "answered" mark and the cycle's row commit before the print); a turn
in flight waits for the database's return and is answered in the same run; a line
offered to the journal twice (a drop mid-insert, a crash before the spill's unlink)
is stored once."""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
import sys

import asyncpg
import pytest

import src.loop.cycle_log as backlog
from src.loop.input_journal import InputJournal, Line, _read_spill
from src.loop.intake import Origin
from src.loop.outage import Outage, waiting_note
from tests.crashpoint import REPLY
from tests.proc import ROOT, agent_env, read_until, run_agent, set_outage, spawn_agent, wait_ready
from tests.test_loop import _mind

SAID = ["my sister Marta lives in Porto", "the dentist moved to Friday at nine",
        "our cat Pixel has three legs", "rent goes up by forty euros in January",
        "I finished reading War and Peace", "the spare key is under the blue pot"]
DROP = asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")


async def _fetch(dsn: str, sql: str, *args) -> list:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


async def _answered_once(dsn: str, said: list[str]) -> list:
    """Every line journaled once and answered; each covered by exactly one cycle. The cycle rows."""
    journal = await _fetch(dsn, "SELECT line, state FROM input_journal ORDER BY id")
    assert [(r["line"], r["state"]) for r in journal] == [(m, "answered") for m in said]
    rows = await _fetch(dsn, "SELECT attention_focus, output FROM thought_log ORDER BY id")
    assert {m: sum(m in r["attention_focus"] for r in rows) for m in said} == dict.fromkeys(said, 1)
    return rows


def _crashing(env: dict[str, str], point: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.crashpoint", point, "1"], cwd=ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


async def _kill_at(point: str, dsn: str) -> tuple[str, str]:
    """A burst, a SIGKILL at `point` of the first reply, a restart on empty input: both stdouts."""
    env = agent_env(DATABASE_URL=dsn)
    proc = _crashing(env, point)
    try:
        first = "\n".join(wait_ready(proc)) + "\n"
        proc.stdin.write(("\n".join(SAID) + "\n").encode())
        proc.stdin.flush()
        out, err = await asyncio.to_thread(proc.communicate, timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == -9, err.decode()[-2000:]
    restart = run_agent(b"", env, timeout=180)
    assert restart.returncode == 0, restart.stderr.decode()[-2000:]
    return first + out.decode(), restart.stdout.decode()


async def test_a_reply_printed_just_before_a_sigkill_is_not_printed_again_after_restart(db_dsn):
    killed, restart = await _kill_at("after_print", db_dsn)
    assert killed.count(REPLY) == 1
    rows = await _answered_once(db_dsn, SAID)
    # one printed reply per cycle: the restart did not answer the killed run's turn again
    # (before issue 26 it did: the mark committed after the print)
    assert killed.count(REPLY) + restart.count(REPLY) == len(rows)


async def test_a_sigkill_between_the_commit_and_the_print_keeps_the_reply_and_never_repeats_it(db_dsn):
    killed, restart = await _kill_at("before_print", db_dsn)
    assert killed.count(REPLY) == 0
    rows = await _answered_once(db_dsn, SAID)
    # the chosen side of the window: the turn is answered (its row holds the reply) and
    # not answered again; it is the one row whose reply never reached the screen
    assert restart.count(REPLY) == len(rows) - 1
    assert rows[0]["output"].startswith(REPLY)


async def test_a_database_outage_longer_than_the_retry_budget_is_waited_out_in_the_same_run(db_dsn, pg_server):
    db = db_dsn.split("?")[0].rsplit("/", 1)[1]
    said = [f"note {i:03d}: the tide pool by the pier holds a red anemone" for i in range(300)]
    proc = spawn_agent(agent_env(DATABASE_URL=db_dsn))
    try:
        wait_ready(proc)
        proc.stdin.write(("\n".join(said) + "\n").encode())
        proc.stdin.flush()
        seen = await asyncio.to_thread(read_until, proc, lambda line: REPLY in line)
        await set_outage(pg_server, db, on=True)
        try:
            await asyncio.sleep(8.0)          # the old retry budget gave a turn up after 3.5 s
        finally:
            await set_outage(pg_server, db, on=False)
        await asyncio.sleep(1.0)
        proc.stdin.write(b"/quit\n")
        proc.stdin.flush()
        out, err = await asyncio.to_thread(proc.communicate, timeout=300)
    finally:
        proc.kill()
    out, err = "\n".join(seen) + "\n" + out.decode(), err.decode()
    assert proc.returncode == 0, err[-2000:]
    assert "could not process your message" not in out
    assert "WARNING src.loop.outage: database unavailable" in err
    # answered in this run: nothing is left for the next start
    journal = await _fetch(db_dsn, "SELECT line, state FROM input_journal ORDER BY id")
    assert [(r["line"], r["state"]) for r in journal] == [(m, "answered") for m in said] + [("/quit", "done")]
    rows = await _fetch(db_dsn, "SELECT attention_focus, at FROM thought_log ORDER BY id")
    assert [m for m in said if m not in "\n".join(r["attention_focus"] for r in rows)] == []
    # the outage fell between turns: one waited through it
    assert max((b["at"] - a["at"]).total_seconds() for a, b in zip(rows, rows[1:], strict=False)) > 7.0


# -- the same, in the process --------------------------------------------------------------

async def _journaled(pool, tmp_path, mind, text: str) -> int:
    journal = InputJournal(pool, mind.loop.cycle_log.session_id, tmp_path / "spill", outage=Outage(),
                           notify=print)
    await journal.open()
    mind.loop.on_answered = journal.answered
    line = Line.decode(text.encode())
    await journal.append([line])
    return line.id


async def test_a_journaled_reply_is_printed_only_after_its_answered_mark_and_row_commit(pool, tmp_path,
                                                                                      monkeypatch):
    mind, _ = await _mind(pool, tmp_path)
    ref = await _journaled(pool, tmp_path, mind, "the bike lock code is in my diary")
    real, failures, printed = backlog.log_answered_cycle, [], []

    async def flaky(*args, **kwargs):          # the first commit fails: the database is reachable
        if not failures:
            failures.append(1)
            raise DROP
        return await real(*args, **kwargs)

    async def deliver(text: str) -> None:      # what the database holds when the reply is printed
        printed.append((text, await pool.fetchval("SELECT state FROM input_journal WHERE id = $1", ref),
                        await pool.fetchval("SELECT count(*) FROM thought_log")))

    async def pause(seconds, stop):
        pass

    monkeypatch.setattr(backlog, "log_answered_cycle", flaky)
    monkeypatch.setattr(mind.loop, "_pause", pause)
    mind.loop.deliver = deliver
    await mind.loop.submit("user", "the bike lock code is in my diary", origin=Origin(ref=ref))
    assert await mind.loop.run(burst=True) == 2              # the failed commit printed nothing
    assert [(REPLY in t, state, rows) for t, state, rows in printed] == [(True, "answered", 1)]
    assert len(mind.loop.backlog) == 0 and mind.loop.intake.attempts == {}


async def test_a_turn_waits_while_the_database_is_away_without_spending_its_retries(pool, tmp_path, monkeypatch):
    mind, delivered = await _mind(pool, tmp_path, overrides={
        "loop": {"cycle_retries": 1, "retry_backoff_s": 0.5, "cycle_deadline_s": 3.0}})
    away, pauses, now = [True], [], [0.0]

    async def cost_line(*args, **kwargs):      # a step of the cycle that needs the database
        if away[0]:
            raise asyncpg.exceptions.CannotConnectNowError("the database system is starting up")
        return ""

    async def probe() -> bool:                 # the database returns after six probes
        away[0] = len(pauses) < 5
        return away[0]

    async def pause(seconds, stop):
        pauses.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(mind.loop.composing, "cost_line", cost_line)
    monkeypatch.setattr(mind.loop.db_wait, "away", probe)
    monkeypatch.setattr(mind.loop.db_wait, "clock", lambda: now[0])
    monkeypatch.setattr(mind.loop, "_pause", pause)
    await mind.loop.submit("user", "please remember the dentist on Friday")
    assert await mind.loop.run(burst=True) == 2
    assert pauses == [0.5, 1.0, 2.0, 2.0, 2.0]          # probes: doubling, capped at 2 s
    # told once, when the wait passed the cycle deadline; then answered, never given up
    assert [d.startswith(REPLY) for d in delivered] == [False, True]
    assert delivered[0] == waiting_note(1)
    assert mind.loop.intake.attempts == {} and not mind.loop.outage.active


@pytest.mark.parametrize("point", ["mid-insert", "before-unlink"])
async def test_a_line_offered_twice_is_journaled_once(pool, tmp_path, monkeypatch, point):
    """`mid-insert`: the insert commits as the connection drops, the lines go to the spill and
    are stored from there. `before-unlink`: the spill is stored, the process dies before the
    file is removed, and the next start stores it again."""
    lines = [Line.decode(t.encode()) for t in SAID[:3]]

    class Flaky:                                # the pool, with one failing journal insert
        def __init__(self) -> None:
            self.failed = False

        def __getattr__(self, name):
            return getattr(pool, name)

        async def fetch(self, sql, *args):
            inserting = "INSERT INTO input_journal" in sql and not self.failed
            rows = None if inserting and point == "before-unlink" else await pool.fetch(sql, *args)
            if inserting:
                self.failed = True
                raise DROP
            return rows

    def killed(*args, **kwargs):
        raise RuntimeError("killed before the spill file was removed")

    told: list[str] = []
    first = InputJournal(Flaky(), "s1", tmp_path, outage=Outage(), notify=told.append)
    await first.open()
    await first.append(lines)
    assert told and told[0].startswith("database unavailable") and first.spill_path.exists()
    if point == "before-unlink":
        with monkeypatch.context() as m:
            m.setattr(pathlib.Path, "unlink", killed)
            with pytest.raises(RuntimeError, match="killed"):
                await first.flush_spill()
        replay = await InputJournal(pool, "s2", tmp_path, outage=Outage(), notify=told.append).open()
        assert [r.text for r in replay] == SAID[:3]
    else:
        assert await first.flush_spill()
        assert [x.id for x in lines] == [r["id"] for r in await pool.fetch("SELECT id FROM input_journal ORDER BY id")]
    assert [r["line"] for r in await pool.fetch("SELECT line FROM input_journal ORDER BY id")] == SAID[:3]


def test_a_spill_written_before_line_keys_still_loads(tmp_path):
    path = tmp_path / "old.jsonl"
    path.write_text('{"kind": "message", "line": "hello", "session": "s0"}\n', encoding="utf-8")
    [line] = _read_spill(path)
    assert (line.kind, line.text) == ("message", "hello") and len(line.key) == 36
