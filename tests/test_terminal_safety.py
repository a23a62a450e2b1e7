"""Terminal safety (issue 11, Deliver 8): what the operator's terminal shows has control
characters and bidi overrides escaped; what is stored is unchanged."""

from __future__ import annotations

import io
import logging

import asyncpg

from src.logging_setup import PlainFormatter
from src.recall.store import MemoryStore, NewMemory
from src.repl import say
from src.terminal import escape
from tests.fakes import HashEmbedder
from tests.proc import agent_env, run_agent

HOSTILE = "octopus den \x1b]0;pwned\x07 then \x1b[2J and \u202eesrever\u202c end\x9b31m"


def test_escape_shows_controls_and_bidi_and_keeps_layout():
    assert escape(HOSTILE) == ("octopus den \\x1b]0;pwned\\x07 then \\x1b[2J and \\u202eesrever\\u202c end"
                               "\\x9b31m")
    assert escape("two\nlines\twith a tab, café, 日本, emoji 🐙") == "two\nlines\twith a tab, café, 日本, emoji 🐙"
    assert escape("\r\x00\x7f\u2066\u2069\u200f") == "\\x0d\\x00\\x7f\\u2066\\u2069\\u200f"


def test_say_and_log_lines_are_escaped():
    out = io.StringIO()
    say(HOSTILE, out)
    assert out.getvalue() == escape(HOSTILE) + "\n"
    record = logging.LogRecord("src.x", logging.WARNING, __file__, 1, "got %s", (HOSTILE,), None)
    line = PlainFormatter("%(levelname)s %(message)s").format(record)
    assert line == "WARNING got " + escape(HOSTILE)
    assert "\x1b" not in line and "\u202e" not in line


async def test_memory_command_prints_a_hostile_memory_escaped(db_dsn, pool):
    memory_id = await MemoryStore(pool, HashEmbedder()).store(NewMemory(HOSTILE))
    result = run_agent(b"/memory octopus den\n/quit\n", agent_env(DATABASE_URL=db_dsn), timeout=120)
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    assert f"  #{memory_id}  " in out          # a row of the /memory table
    assert "octopus den \\x1b]0;pwned\\x07 then \\x1b[2J and \\u202eesrever\\u202c end\\x9b31m" in out
    for raw in ("\x1b", "\x07", "\u202e", "\u202c", "\x9b"):
        assert raw not in out and raw not in result.stderr.decode()
    conn = await asyncpg.connect(db_dsn)
    try:
        assert await conn.fetchval("SELECT content FROM memories WHERE id = $1", memory_id) == HOSTILE
    finally:
        await conn.close()
