"""Issue 26, Deliver 1: the conversation screen shows only the conversation.

Log lines go to the log file (stderr shows warnings only), the deep pass's summary is
printed once, a prompt is drawn when a person types at a terminal (never into piped
output), and every command answers in sentences or aligned tables: /readiness without
JSON, /memory with scores a person can read (explained once in /help).
"""

from __future__ import annotations

import io
import logging
import os
import re
import select
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from src.bootstrap.readiness import event_text
from src.config import LoggingSettings, load_settings
from src.logging_setup import configure_logging, log_file
from src.recall.readable import LEGEND, memory_table
from src.recall.retrieval import Retriever
from src.recall.settings import RetrievalSettings
from src.recall.store import MemoryStore, NewMemory
from src.repl import PROMPT, Screen, interactive
from src.weights.safety import Safety
from tests.fakes import HashEmbedder
from tests.proc import READY, ROOT, agent_env, read_until, run_agent, spawn_agent, wait_ready


@pytest.fixture
def root_logging():
    """configure_logging rewires the root logger: put pytest's handlers back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    for h in root.handlers:
        if h not in handlers:
            h.close()
    root.handlers[:], root.level = handlers, level


# -- logging: a file for the record, the terminal for warnings ----------------------------------------

def test_info_goes_to_the_log_file_and_only_warnings_to_the_terminal(tmp_path, root_logging):
    terminal = io.StringIO()
    path = configure_logging(LoggingSettings(file=tmp_path / "logs" / "moltbot.log"), stderr=terminal)
    assert path == Path(os.path.abspath(tmp_path / "logs" / "moltbot.log")) and log_file() == path
    logging.getLogger("src.gates.scratch").info("scratch flush: 3 evaluated")
    logging.getLogger("src.loop.outage").warning("database unavailable")
    assert terminal.getvalue().endswith("WARNING src.loop.outage: database unavailable\n")
    assert "scratch flush" not in terminal.getvalue()
    logged = path.read_text(encoding="utf-8")
    assert "INFO src.gates.scratch: scratch flush: 3 evaluated" in logged and "database unavailable" in logged
    assert re.match(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} INFO ", logged)      # the file's lines are dated


def test_without_a_file_or_when_it_cannot_be_written_everything_goes_to_stderr(tmp_path, root_logging):
    terminal = io.StringIO()
    assert configure_logging(LoggingSettings(file=None), stderr=terminal) is None
    logging.getLogger("src.x").info("kept on stderr")
    assert "INFO src.x: kept on stderr" in terminal.getvalue()
    (tmp_path / "plain").write_text("a file, not a folder")
    terminal = io.StringIO()
    assert configure_logging(LoggingSettings(file=tmp_path / "plain" / "m.log"), stderr=terminal) is None
    logging.getLogger("src.x").info("still visible")
    assert "cannot write the log file" in terminal.getvalue() and "still visible" in terminal.getvalue()


def test_log_level_and_file_come_from_the_environment(tmp_path):
    settings = load_settings(tmp_path / "none.yaml", env={"MOLTBOT_LOG_LEVEL": "debug", "MOLTBOT_LOG_FILE": "-"})
    assert (settings.logging.level, settings.logging.file) == ("DEBUG", None)
    settings = load_settings(tmp_path / "none.yaml", env={"MOLTBOT_LOG_FILE": str(tmp_path / "x.log")})
    assert (settings.logging.file, settings.logging.terminal_level) == (tmp_path / "x.log", "WARNING")
    assert load_settings(tmp_path / "none.yaml", env={}).logging.file == Path("data/moltbot.log")


def test_the_service_keeps_info_out_of_the_terminal_and_says_the_deep_pass_once(db_dsn, tmp_path):
    logged = tmp_path / "moltbot.log"
    proc = spawn_agent(agent_env(DATABASE_URL=db_dsn, MOLTBOT_LOG_FILE=str(logged)))
    try:
        ready = wait_ready(proc)
        proc.stdin.write(b"I planted three lemon trees in the garden today\n/consolidate\n")
        proc.stdin.flush()
        seen = read_until(proc, lambda line: line.startswith("deep pass #"), timeout=120)
        proc.stdin.write(b"/quit\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    out, err = "\n".join(ready + seen) + "\n" + out.decode(), err.decode()
    assert proc.returncode == 0, err
    assert f"; log in {logged}. {READY}" in ready[-1]
    assert " INFO " not in err, err                      # scratch flushes, milestones: the log file's
    assert out.count("deep pass #") == 1 and "deep pass #" not in err
    assert " INFO src.consolidation.deep.deep_pass: deep pass #" in logged.read_text(encoding="utf-8")
    assert not any(line.startswith(PROMPT) for line in out.splitlines())   # piped: no prompt


# -- the prompt -------------------------------------------------------------------------------------

def test_screen_draws_the_prompt_after_each_output_and_clears_it_for_the_next():
    out = io.StringIO()
    screen = Screen(out, prompt=True)
    screen.say("ready")
    screen.show_prompt()                       # already showing: not drawn twice
    screen.say("a reply that arrived while waiting")
    screen.typed()                             # Enter: the cursor is on a fresh line
    screen.say("the answer")
    screen.last("shutting down")
    assert out.getvalue() == ("ready\n> \r\x1b[Ka reply that arrived while waiting\n> the answer\n> "
                              "\r\x1b[Kshutting down\n")
    piped = io.StringIO()
    Screen(piped, prompt=False).say("x\x1b[2J")
    assert piped.getvalue() == "x\\x1b[2J\n"
    assert interactive(piped) is False


def _read_pty(fd: int, until: str, timeout: float = 60) -> str:
    seen, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline and until.encode() not in seen:
        if select.select([fd], [], [], 0.5)[0]:
            try:
                chunk = os.read(fd, 4096)
            except OSError:            # EIO: the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
    return seen.decode(errors="replace")


def test_a_terminal_gets_a_prompt(db_dsn, tmp_path):
    master, slave = os.openpty()
    history = tmp_path / "runtime.yaml"         # the prompt's history: not the developer's data/history
    history.write_text(f"agent: {{history_file: {tmp_path / 'history'}}}\n", encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "src.main"], cwd=ROOT,
                            env=agent_env(DATABASE_URL=db_dsn, MOLTBOT_CONFIG=str(history)),
                            stdin=slave, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    try:
        started = _read_pty(master, f"{READY}\r\n{PROMPT}")
        assert started.endswith(f"{READY}\r\n{PROMPT}"), started[-300:]
        os.write(master, b"/memory-mode\n")
        answered = _read_pty(master, "to change\r\n" + PROMPT)
        assert answered.endswith("/memory-mode autopilot|copilot|off to change\r\n" + PROMPT), answered[-300:]
        os.write(master, b"/quit\n")
        assert "shutting down" in _read_pty(master, "shutting down\r\n")
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        os.close(master)


# -- command output: sentences and tables ---------------------------------------------------------

def test_readiness_events_read_as_words():
    assert event_text({"memory_ids": [5, 6], "path": "entry → scratch → exit → persist"}) == (
        "memories #5, #6; entry → scratch → exit → persist")
    assert event_text({"cycle": 4, "memory_ids": [5], "recalled": [5, 6], "semantic": 0.7123,
                       "query": "how old\nis Miso?\x1b[2J"}) == (
        'cycle 4; memory #5; recalled #5, #6; similarity 0.71; query "how old is Miso?\\x1b[2J"')
    assert event_text({"memory_id": 3, "tier": "goal", "center_before": 0.55, "center_after": 0.62}) == (
        "memory #3; goal tier; weight center 0.55 → 0.62")
    assert event_text({}) == "no details recorded"


async def _retrieve(pool, contents: list[str], query: str, keep: int = 5):
    store = MemoryStore(pool, HashEmbedder())
    ids = [await store.store(NewMemory(text)) for text in contents]
    retriever = Retriever(pool, HashEmbedder(), None, Safety(), RetrievalSettings(keep=keep))
    return ids, await retriever.retrieve(query, rng=np.random.default_rng(0), mutate=False)


async def test_memory_shows_shares_of_the_best_words_meaning_and_held(pool):
    _, result = await _retrieve(pool, ["what do I keep?", "the bakery on Rua Augusta opens at seven"], "whale")
    text = memory_table(result, datetime.now(UTC))
    lines = text.splitlines()
    assert lines[0] == "2 memories recalled, best first (/help explains the columns):"
    assert lines[1].split() == ["memory", "of", "best", "words", "meaning", "held", "said", "kind", "text"]
    assert lines[2].split()[1] == "100%" and lines[2].split()[2] == "no"
    assert lines[3].split()[1] != "0%"                      # min-max `final` put the last row at 0
    assert lines[-2] == "None of these contains a word you asked with: they were found by meaning alone."
    assert lines[-1] == "note: not reranked (no reranker configured)"
    assert "score" not in text and "center" not in text and "final" not in text
    # the columns line up: every row starts its text where the header's "text" starts
    start = lines[1].index("text")
    assert all(row[start - 2:start] == "  " and row[start] != " " for row in lines[2:4])
    [whale], result = await _retrieve(pool, ["the whale sang all night"], "whale song")
    text = memory_table(result, datetime.now(UTC))
    rows = {line.split()[0]: line.split() for line in text.splitlines()[2:] if line.startswith("  #")}
    assert rows[f"#{whale}"][2] == "yes"                   # it contains a word of the question
    assert "found by meaning alone" not in text


def test_help_explains_the_memory_columns_once():
    legend = "\n".join(LEGEND)
    for column in ("of best", "words", "meaning", "held", "said", "stored"):
        assert legend.count(f"  {column} ") == 1
    assert "center (mean) of its Beta weight" in legend


async def test_near_misses_carry_their_own_final_score(pool):
    contents = [f"the garden needs {thing} this week" for thing in
                ("water", "compost", "mulch", "seeds", "a fence", "a gate", "weeding", "sunlight")]
    _, result = await _retrieve(pool, contents, "garden", keep=2)
    assert len(result.memories) == 2 and len(result.near_misses) == 6
    finals = [r.final for r in result.near_misses]
    assert any(f > 0 for f in finals)                      # was 0.0 for every near miss
    assert max(finals) <= min(r.final for r in result.memories)


def test_help_and_memory_at_the_prompt(db_dsn):
    result = run_agent(b"/help\n/memory whale\n/quit\n", agent_env(DATABASE_URL=db_dsn))
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    assert out.count("Reading /memory: one row per memory recalled, best first.") == 1
    assert "score 1.000" not in out and "{" not in out
