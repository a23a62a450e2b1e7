"""Consolidation at the prompt and on the command line, and the deep scheduler's triggers."""

from __future__ import annotations

import asyncio
import io
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import asyncpg

from src.config import Settings
from src.consolidation.deep.deep_pass import ConsolidationParts, check_trigger
from src.consolidation.deep.phase import Phase, PhaseResult
from src.consolidation.service import Consolidation
from src.consolidation.settings import ConsolidationSettings
from src.main import Agent, Running
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.fakes import HashEmbedder
from tests.proc import ROOT, agent_env, read_until, spawn_agent, wait_ready

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


async def _decisions(pool, rows):
    await pool.executemany(
        """INSERT INTO gate_decisions (at, gate, source_tag, content_preview, action, relevance, emotional_charge, reason)
           VALUES ($1, 'exit', 'external_user', 'x', $2, $3, $4, 'test')""", rows)


async def test_trigger_is_the_timer_or_cumulative_importance_whichever_first(pool):
    settings = ConsolidationSettings(deep={"importance_threshold": 2.0, "interval_s": 3600})
    epoch = NOW - timedelta(minutes=10)
    assert (await check_trigger(pool, settings, NOW, epoch)).trigger is None
    # importance = relevance * (1 + charge) over what the exit gate wrote; drops and buffers do not count
    await _decisions(pool, [(NOW - timedelta(minutes=5), "persist", 0.8, 0.5),     # 1.2
                            (NOW - timedelta(minutes=4), "drop", 0.9, 0.9),        # not written
                            (NOW - timedelta(minutes=3), "reinforce", 0.5, 0.0)])  # 0.5
    state = await check_trigger(pool, settings, NOW, epoch)
    assert state.trigger is None and round(state.importance, 9) == 1.7
    await _decisions(pool, [(NOW - timedelta(minutes=2), "persist_flag", 0.6, 0.0)])  # 0.6
    state = await check_trigger(pool, settings, NOW, epoch)
    assert state.trigger == "importance" and round(state.importance, 9) == 2.3
    # after a pass the sum starts again from that pass's start; the timer counts from it too
    await pool.execute("INSERT INTO consolidation_passes (trigger, status, started_at) VALUES ('manual', 'done', $1)",
                       NOW - timedelta(minutes=1))
    state = await check_trigger(pool, settings, NOW, epoch)
    assert state.trigger is None and state.importance == 0.0
    assert (await check_trigger(pool, settings, NOW + timedelta(minutes=61), epoch)).trigger == "timer"
    # a pass left running by a crash is resumed first
    await pool.execute("INSERT INTO consolidation_passes (trigger) VALUES ('timer')")
    assert (await check_trigger(pool, settings, NOW, epoch)).trigger == "resume"


async def test_service_starts_and_stops_cleanly_and_reports_the_last_pass(pool):
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many([NewMemory(f"same words said again and again {i}") for i in range(3)])
    settings = ConsolidationSettings(light={"tick_s": 0.05}, deep={"check_interval_s": 0.05})
    service = Consolidation(ConsolidationParts(pool, embedder=embedder, llm=None, safety=Safety(), settings=settings))
    assert await service.status_line() == "consolidation: no deep pass yet"
    service.start()
    report = await service.deep_pass()
    await service.stop(timeout_s=5)
    assert report.status == "done"
    line = await service.status_line()
    assert line.startswith(f"consolidation: last deep pass #{report.pass_id} (manual) done ")
    assert ", 0/15 LLM calls, 0+0 tokens; light ticks this session: " in line
    assert service.ticker.ticks >= 1


async def test_consolidate_why_and_status_at_the_prompt(db_dsn):
    proc = spawn_agent(agent_env(DATABASE_URL=db_dsn))
    try:
        wait_ready(proc)
        proc.stdin.write(b"/consolidate\n")
        proc.stdin.flush()
        read_until(proc, lambda line: line == "deep pass started; its summary follows when it is done")
        summary = read_until(proc, lambda line: line.startswith("deep pass #1 (manual) done in "))[-1]
        assert ": 0/15 LLM calls, 0+0 tokens; nothing new; skipped: " in summary
        out, err = proc.communicate(b"/why 999\n/why x\n/status\n", timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err.decode()
    out = out.decode()
    assert "no memory #999" in out
    assert "usage: /why <memory id>, e.g. /why 42" in out
    assert "consolidation: last deep pass #1 (manual) done " in out


async def test_consolidate_returns_at_once_and_says_the_summary_when_the_pass_ends(pool):
    """Issue 26: /consolidate held the next message for the whole pass (14 s)."""
    release = asyncio.Event()

    async def slow(ctx):
        await release.wait()
        return PhaseResult()

    service = Consolidation(ConsolidationParts(pool, embedder=HashEmbedder(), llm=None, safety=Safety(),
                                               settings=ConsolidationSettings()),
                            phases=[Phase("slow", slow)])
    out = io.StringIO()
    agent = Agent(Settings(), None, None, "test-session", out,
                  running=Running(SimpleNamespace(consolidation=service)))
    try:
        reply = await asyncio.wait_for(agent.commands.dispatch("/consolidate"), 5)
        assert reply == "deep pass started; its summary follows when it is done"
        again = await asyncio.wait_for(agent.commands.dispatch("/consolidate"), 5)
        assert again == "a deep pass is already running; try again later"
        await asyncio.sleep(0.2)
        assert out.getvalue() == ""                      # still running: nothing said yet
        release.set()
        for _ in range(500):
            if out.getvalue():
                break
            await asyncio.sleep(0.02)
        assert out.getvalue().startswith("deep pass #1 (manual) done in ")
        assert out.getvalue().count("\n") == 1
    finally:
        release.set()
        await service.stop(timeout_s=5)


async def test_a_pass_started_on_request_and_stopped_by_shutdown_says_so(pool):
    async def forever(ctx):
        await asyncio.sleep(3600)
        return PhaseResult()

    said: list[str] = []
    service = Consolidation(ConsolidationParts(pool, embedder=HashEmbedder(), llm=None, safety=Safety(),
                                               settings=ConsolidationSettings()),
                            phases=[Phase("forever", forever)])
    assert service.start_deep_pass(said.append)
    await asyncio.sleep(0.2)
    await service.stop(timeout_s=0.1)
    assert said == ["the deep pass was stopped by the shutdown; the next one resumes it"]
    assert await pool.fetchval("SELECT status FROM consolidation_passes") == "running"


async def test_command_line_why_prints_the_chain(db_dsn):
    conn = await asyncpg.connect(db_dsn)
    try:
        src = await conn.fetchval("INSERT INTO memories (content, created_at) VALUES ('I saw the\x1b[31m sea', "
                                  "'2026-11-01 09:30+00') RETURNING id")
        ins = await conn.fetchval("INSERT INTO memories (content, memory_type, created_at) VALUES "
                                  "('I like the sea', 'reflection', '2026-11-02 10:00+00') RETURNING id")
        await conn.execute("INSERT INTO memory_supersedes (insight_id, source_id, via) VALUES ($1, $2, 'merge')",
                           ins, src)
    finally:
        await conn.close()
    result = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "src.consolidation", "why", str(ins)], cwd=ROOT,
        env=agent_env(DATABASE_URL=db_dsn), capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr.decode()
    # dated in words against the wall clock (the relative part moves with it)
    ago = r"\d+ (?:days|weeks|months|years) ago"
    lines = result.stdout.decode().splitlines()
    assert len(lines) == 2
    assert re.fullmatch(rf"#{ins} \[reflection\] said Mon 2 Nov 2026, {ago}; center 0\.20 \(Beta 1\.00, 4\.00\) "
                        r"I like the sea", lines[0]), lines[0]
    assert re.fullmatch(rf"  #{src} \[episodic <- merge\] said Sun 1 Nov 2026, {ago}; center 0\.20 "
                        r"\(Beta 1\.00, 4\.00\) I saw the\\x1b\[31m sea", lines[1]), lines[1]
