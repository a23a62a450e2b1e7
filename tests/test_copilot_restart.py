"""Copilot's held items across a SIGKILL, with the real process: a copilot run holds what
the exit gate is unsure of and is killed; the next start (in autopilot) says so, lists
them with /held, asks about them after its first answer as from before the restart, and
writes exactly the one the guardian keeps."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import time
from pathlib import Path

import asyncpg
import yaml

from tests.proc import agent_env, read_until, set_key, shipped_config, spawn_agent, wait_ready
from tests.test_memory_modes import TOPICS

QUESTION = "Keep these? (y/n/numbers)"


def _config(tmp_path: Path, mode: str) -> Path:
    """The shipped runtime.yaml, with every item landing in the exit gate's buffer cell
    (peripheral, novel: "undecided"; ACT-R's τ, which lifts a row, off), no noise floor, no
    web view, and `mode`."""
    runtime = set_key(shipped_config(), "gates.exit.noise_floor", 0.0)
    set_key(runtime, "gates.exit.persist_tau", None)
    set_key(runtime, "gates.exit.thresholds.default",
            {"core": 0.99, "peripheral": 0.0, "confirming": 0.99, "novel": 0.98, "contradicting": 0.995})
    set_key(runtime, "gates.memory.mode", mode)
    runtime["web"] = {"enabled": False}
    path = tmp_path / f"{mode}.yaml"
    path.write_text(yaml.safe_dump(runtime), encoding="utf-8")
    return path


def _send(proc: subprocess.Popen, text: str) -> None:
    proc.stdin.write(text.encode() + b"\n")
    proc.stdin.flush()


async def _wait_held(conn: asyncpg.Connection, contents: list[str], within_s: float = 60) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        held = await conn.fetchval("SELECT count(*) FROM held_memories h JOIN scratch_buffer s "
                                   "ON s.id = h.scratch_id WHERE s.content = ANY($1)", contents)
        if held == len(contents):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{len(contents)} items were not held within {within_s}s (last {held})")


async def test_held_items_survive_sigkill_and_are_asked_again_in_autopilot(db_dsn, tmp_path):
    env = agent_env(DATABASE_URL=db_dsn)
    conn = await asyncpg.connect(db_dsn)
    try:
        proc = spawn_agent(env, ("--config", str(_config(tmp_path, "copilot"))))
        try:
            wait_ready(proc)
            for text in TOPICS[:5]:          # one at a time: five exchanges start a flush
                _send(proc, text)
                read_until(proc, lambda line: line.startswith("(reflex mode — "))
            await _wait_held(conn, TOPICS[:5])
            proc.send_signal(signal.SIGKILL)
            assert proc.wait(timeout=10) == -signal.SIGKILL
        finally:
            proc.kill()
        held = await conn.fetchval("SELECT count(*) FROM held_memories")

        proc = spawn_agent(env, ("--config", str(_config(tmp_path, "autopilot"))))
        try:
            start = wait_ready(proc)
            assert (f"{held} memories held for your decision before the restart; I ask about them after "
                    "my next answer (/held lists them)") in start
            _send(proc, "/held")
            listed = read_until(proc, lambda line: line.startswith("I ask about them"))
            assert listed[0] == f"{held} memories held for your decision:"
            assert re.fullmatch(r"  scratch #\d+, held \d+ s ago \[undecided\]: " + re.escape(TOPICS[0]),
                                listed[1]), listed[1]
            _send(proc, "/pending")          # the approval queue points at them, without listing them twice
            assert read_until(proc, lambda line: "held for your decision" in line)[-2:] == [
                "no approvals pending", f"{held} memory item(s) held for your decision (copilot): /held lists them"]
            _send(proc, TOPICS[6])
            asked = read_until(proc, lambda line: line == QUESTION)
            first = asked.index("Memories I am unsure of:")
            assert re.fullmatch(r"  1\. \[undecided; from before the restart, held \d+ s ago\] "
                                + re.escape(TOPICS[0]), asked[first + 1]), asked[first + 1]
            assert len(asked) - first == held + 2
            _send(proc, "1")
            assert read_until(proc, lambda line: line.startswith("kept "))[-1] == (
                f"kept 1, dropped {held - 1}")
            _send(proc, "/quit")
            assert proc.wait(timeout=60) == 0
        finally:
            proc.kill()

        assert await conn.fetchval("SELECT count(*) FROM held_memories") == 0
        assert [r["content"] for r in await conn.fetch(
            "SELECT content FROM memories WHERE content = ANY($1)", TOPICS[:5])] == [TOPICS[0]]
        # the kept one was written once, by the guardian's answer, and nothing else of the held
        assert await conn.fetchval(
            "SELECT count(*) FROM gate_decisions WHERE gate = 'exit' AND action = 'persist' "
            "AND reason LIKE '%kept by the guardian (copilot)'") == 1
    finally:
        await conn.close()
