"""Issue 11 with the real process: every message is kept durably and answered, in order —
piped conversations, a SIGKILL right after a burst, a database outage, a flood."""

from __future__ import annotations

import asyncio
import signal
import time

import asyncpg

from tests.proc import agent_env, run_agent, set_outage, spawn_agent, wait_ready


def _lines(n: int, what: str) -> list[str]:
    return [f"{what} number {i:04d} is about tide pools and octopus dens" for i in range(n)]


async def _fetch(dsn: str, sql: str, *args):
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


async def _covered(dsn: str) -> str:
    """Every attention focus of every cycle, one text: a combined turn holds all its messages."""
    rows = await _fetch(dsn, "SELECT attention_focus FROM thought_log ORDER BY id")
    return "\n".join(r["attention_focus"] for r in rows)


async def _journal(dsn: str) -> list[tuple[str, str, str]]:
    rows = await _fetch(dsn, "SELECT kind, line, state FROM input_journal ORDER BY id")
    return [(r["kind"], r["line"], r["state"]) for r in rows]


async def test_quit_answers_everything_said_before_it_and_commands_keep_their_place(db_dsn):
    said = _lines(20, "message")
    stdin = ("\n".join(said) + "\n   /cost\n/quit\n").encode()
    result = run_agent(stdin, agent_env(DATABASE_URL=db_dsn), timeout=180)
    out, err = result.stdout.decode(), result.stderr.decode()
    assert result.returncode == 0, err
    assert "Traceback" not in err
    # a command with leading spaces is still a command (not stored as a message)
    assert "No language-model calls recorded yet." in out
    # "shutting down" comes last, after the answer to the last message (it once came first
    # when /quit arrived while a cycle held the last messages)
    assert out.rstrip().endswith("shutting down") and out.splitlines().count("shutting down") == 1
    assert out.rindex("(reflex mode — no language model is configured") < out.rindex("shutting down")
    covered = await _covered(db_dsn)
    assert [m for m in said if m not in covered] == []
    journal = await _journal(db_dsn)
    assert journal == [("message", m, "answered") for m in said] + [
        ("command", "   /cost", "done"), ("command", "/quit", "done")]
    # every reply says what it answers: one line per cycle, combined turns framed
    replies = out.count("(reflex mode — no language model is configured")
    turns = await _fetch(db_dsn, "SELECT attention_focus FROM thought_log")
    assert replies == len(turns)
    combined = [r["attention_focus"] for r in turns if r["attention_focus"].startswith("[")]
    assert out.count(" messages together: ") == len(combined)
    scratch = await _fetch(db_dsn, "SELECT content FROM scratch_buffer WHERE content LIKE '%/cost%'")
    assert scratch == []


async def test_sigkill_right_after_a_burst_loses_no_line_and_the_restart_answers_them(db_dsn):
    said = _lines(60, "burst line")
    for delay in (0.3, 0.6):
        proc = spawn_agent(agent_env(DATABASE_URL=db_dsn))
        try:
            wait_ready(proc)
            proc.stdin.write(("\n".join(said) + "\n").encode())   # one write: one burst
            proc.stdin.flush()
            await asyncio.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            killed = proc.stdout.read().decode()
        finally:
            proc.kill()
        journal = await _journal(db_dsn)
        assert [line for _, line, _ in journal] == said, f"after SIGKILL at {delay} s"
        # the restart (end of input at once) answers what the killed run never did
        result = run_agent(b"", agent_env(DATABASE_URL=db_dsn), timeout=180)
        assert result.returncode == 0, result.stderr.decode()
        assert {state for _, _, state in await _journal(db_dsn)} == {"answered"}
        covered = await _covered(db_dsn)
        assert [m for m in said if m not in covered] == []
        # no reply twice: the killed run's printed replies all have their cycle row (issue 26)
        printed = (killed + result.stdout.decode()).count("(reflex mode — no language model is configured")
        assert printed <= len(await _fetch(db_dsn, "SELECT id FROM thought_log")), f"after SIGKILL at {delay} s"
        await _fetch(db_dsn, "TRUNCATE input_journal, thought_log")


async def test_a_flood_of_a_thousand_messages_is_answered_without_eviction(db_dsn):
    said = _lines(1000, "flood")
    result = run_agent(("\n".join(said) + "\n").encode(), agent_env(DATABASE_URL=db_dsn), timeout=600)
    assert result.returncode == 0, result.stderr.decode()
    covered = await _covered(db_dsn)
    assert [m for m in said if m not in covered] == []
    assert {state for _, _, state in await _journal(db_dsn)} == {"answered"}
    assert "attention queue full" not in result.stderr.decode()


def _read_until(proc, needle: str, timeout: float = 60) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if needle in line:
            return lines
    raise AssertionError(f"{needle!r} not seen: {lines}")


async def test_database_outage_holds_input_says_so_once_and_answers_everything(db_dsn, pg_server):
    db = db_dsn.split("?")[0].rsplit("/", 1)[1]
    before, during = _lines(5, "before"), _lines(20, "during")
    proc = spawn_agent(agent_env(DATABASE_URL=db_dsn))
    try:
        wait_ready(proc)
        proc.stdin.write(("\n".join(before) + "\n").encode())
        proc.stdin.flush()
        await asyncio.sleep(1.0)
        await set_outage(pg_server, db, on=True)
        try:
            proc.stdin.write(("\n".join(during) + "\n").encode())
            proc.stdin.flush()
            held = await asyncio.to_thread(_read_until, proc, "database unavailable: your input is held")
            await asyncio.sleep(2.0)
        finally:
            await set_outage(pg_server, db, on=False)
        back = await asyncio.to_thread(_read_until, proc, "database is back: ")
        proc.stdin.write(b"/quit\n")
        proc.stdin.flush()
        out, err = await asyncio.to_thread(proc.communicate, timeout=120)
    finally:
        proc.kill()
    out = "\n".join(held + back) + out.decode()
    err = err.decode()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert out.count("database unavailable: your input is held") == 1
    assert err.count("WARNING src.loop.outage: database unavailable") >= 1
    assert err.count("WARNING src.loop.outage: database available again") >= 1
    covered = await _covered(db_dsn)
    assert [m for m in before + during if m not in covered] == []
    journal = await _journal(db_dsn)
    assert [line for _, line, _ in journal] == before + during + ["/quit"]
    assert {state for _, _, state in journal} == {"answered", "done"}


async def test_sigkill_during_an_outage_keeps_the_held_input(db_dsn, pg_server):
    db = db_dsn.split("?")[0].rsplit("/", 1)[1]
    during = _lines(20, "held")
    proc = spawn_agent(agent_env(DATABASE_URL=db_dsn))
    try:
        wait_ready(proc)
        await set_outage(pg_server, db, on=True)
        try:
            proc.stdin.write(("\n".join(during) + "\n").encode())
            proc.stdin.flush()
            await asyncio.to_thread(_read_until, proc, "database unavailable: your input is held")
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            await set_outage(pg_server, db, on=False)
    finally:
        proc.kill()
    result = run_agent(b"", agent_env(DATABASE_URL=db_dsn), timeout=180)
    assert result.returncode == 0, result.stderr.decode()
    assert "20 message(s) from an earlier run were never answered; answering them now" in result.stderr.decode()
    journal = await _journal(db_dsn)
    assert [(line, state) for _, line, state in journal] == [(m, "answered") for m in during]
    covered = await _covered(db_dsn)
    assert [m for m in during if m not in covered] == []
