"""`python -m src.main` as a subprocess: start, commands, shutdown, clear start-up failures."""

from __future__ import annotations

import signal
import time

import asyncpg

from tests.proc import (
    READY,
    agent_env,
    noiseless_config,
    run_agent,
    spawn_agent,
    start_up_lines,
    wait_ready,
)


async def test_help_and_quit(db_dsn):
    result = run_agent(b"/help\n/quit\n", agent_env(DATABASE_URL=db_dsn))
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    lines = start_up_lines(result.stderr.decode())      # a piped stdout is only the conversation
    assert lines[0].startswith("database: PostgreSQL at postgresql://postgres:***@/")
    assert lines[1] == ("embeddings: minilm minilm-l6-v2-int8 "
                        "(GEMINI_API_KEY not set; offline, 384-d zero-padded to 768)")
    assert lines[2].startswith("reranker: none (model folder missing: ")
    assert lines[3] == ("system1: reflex (no language model is configured: "
                        "GEMINI_API_KEY not set, llm.base_url not set)")
    assert lines[4].startswith("system2: reflex (")
    assert READY in lines[-1] and READY not in out
    assert "  /help " in out and "  /quit " in out and "  /status " in out
    assert out.rstrip().endswith("shutting down")
    assert "Traceback" not in result.stderr.decode()


async def test_end_of_input_shuts_down_cleanly_and_records_uptime(db_dsn):
    result = run_agent(b"hello, are you there?\n", agent_env(DATABASE_URL=db_dsn))
    assert result.returncode == 0, result.stderr.decode()
    conn = await asyncpg.connect(db_dsn)
    try:
        row = await conn.fetchrow("SELECT times_restarted, last_shutdown_at FROM agent_manifest")
        kept = await conn.fetch("SELECT content, source_tag FROM scratch_buffer")
    finally:
        await conn.close()
    assert row["times_restarted"] == 0 and row["last_shutdown_at"] is not None
    assert [(r["content"], r["source_tag"]) for r in kept] == [("hello, are you there?", "external_user")]


async def test_restart_is_counted(db_dsn):
    for _ in range(2):
        assert run_agent(b"/quit\n", agent_env(DATABASE_URL=db_dsn)).returncode == 0
    conn = await asyncpg.connect(db_dsn)
    try:
        assert await conn.fetchval("SELECT times_restarted FROM agent_manifest") == 1
    finally:
        await conn.close()


def test_sigterm_exits_zero_quickly(db_dsn):
    proc = spawn_agent(agent_env(DATABASE_URL=db_dsn))
    try:
        wait_ready(proc)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert time.monotonic() - started < 10
    finally:
        proc.kill()


async def test_bad_bytes_are_cleaned_and_said(db_dsn):
    # both lines are 10+ characters: the entry gate skips shorter ones 95% of the time
    stdin = b"nul\x00inside a line\nbad \xff\xfe utf8\n   \n/nonsense\n/quit\n"
    result = run_agent(stdin, agent_env(DATABASE_URL=db_dsn))
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    assert "note: NUL bytes were removed" in out
    assert "note: invalid UTF-8 bytes were replaced with U+FFFD" in out
    assert "unknown command /nonsense; type /help for the list" in out
    conn = await asyncpg.connect(db_dsn)
    try:
        kept = [r["content"] for r in await conn.fetch("SELECT content FROM scratch_buffer ORDER BY id")]
    finally:
        await conn.close()
    assert kept == ["nulinside a line", "bad \ufffd\ufffd utf8"]


async def test_oversized_line_is_refused_and_the_loop_goes_on(db_dsn, tmp_path):
    config = tmp_path / "runtime.yaml"
    config.write_text("agent:\n  max_input_chars: 1000\n")
    stdin = b"x" * 5000 + b"\nafter the big one\n/quit\n"
    result = run_agent(stdin, agent_env(DATABASE_URL=db_dsn), ("--config", str(config)))
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    assert "input refused: the line has 5,001 bytes, more than the 1,000 allowed (agent.max_input_chars); nothing was stored" in out
    conn = await asyncpg.connect(db_dsn)
    try:
        kept = [r["content"] for r in await conn.fetch("SELECT content FROM scratch_buffer")]
    finally:
        await conn.close()
    assert kept == ["after the big one"]


async def test_megabyte_message_is_accepted(db_dsn, tmp_path):
    big = ("lorem ipsum " * 83_250).encode()  # 999,000 bytes: just under the default 1,000,000 limit
    # Accepted means stored as a memory; without the noise floor the newborn gate's
    # core/novel cell persists it every run instead of deferring it 5% of the time.
    config = noiseless_config(tmp_path)
    result = run_agent(big + b"\n", agent_env(DATABASE_URL=db_dsn), ("--config", str(config)))
    assert result.returncode == 0, result.stderr.decode()
    assert "(reflex mode — no language model is configured" in result.stdout.decode()
    conn = await asyncpg.connect(db_dsn)
    try:
        assert await conn.fetchval("SELECT length(content) FROM scratch_buffer") == len(big)
        row = await conn.fetchrow("SELECT action, noise_rate, reason FROM gate_decisions WHERE gate = 'exit'")
        assert (row["action"], row["noise_rate"]) == ("persist", 0.0), dict(row)
        assert await conn.fetchval("SELECT length(content) FROM memories WHERE NOT immutable") == len(big)
    finally:
        await conn.close()


def test_unreachable_database_is_one_line(tmp_path):
    result = run_agent(b"", agent_env(DATABASE_URL="postgresql://someone:hunter2@127.0.0.1:1/nowhere"))
    err = result.stderr.decode().strip()
    assert result.returncode == 1
    assert err.count("\n") == 0, err
    assert err.startswith("cannot start: cannot connect to PostgreSQL at postgresql://someone:***@127.0.0.1:1/nowhere: ")
    assert "hunter2" not in err


def test_invalid_config_is_one_line_naming_the_key(tmp_path):
    config = tmp_path / "runtime.yaml"
    config.write_text("database:\n  pool_max: many\n")
    result = run_agent(b"", agent_env(), ("--config", str(config)))
    assert result.returncode == 2
    assert result.stderr.decode().strip() == (
        f"configuration error: {config}: invalid value for 'database.pool_max': "
        "Input should be a valid integer, unable to parse string as an integer (got 'many')"
    )


def test_second_instance_on_the_same_data_dir_is_refused(tmp_path):
    config = tmp_path / "runtime.yaml"
    config.write_text(f"database:\n  data_dir: {tmp_path / 'pg'}\n  stop_embedded_on_exit: true\n")
    first = spawn_agent(agent_env(), ("--config", str(config)))
    try:
        lines = start_up_lines("\n".join(wait_ready(first)))
        assert lines[0].startswith(f"database: embedded PostgreSQL in {tmp_path / 'pg'} (started in ")
        second = run_agent(b"", agent_env(), ("--config", str(config)))
        err = second.stderr.decode().strip()
        assert second.returncode == 1
        assert err == (f"cannot start: another MoltBot instance (pid {first.pid}) is using {tmp_path}; "
                       "stop it first or point database.data_dir elsewhere")
        first.stdin.write(b"/quit\n")
        first.stdin.flush()
        assert first.wait(timeout=20) == 0
    finally:
        first.kill()


async def test_cost_command_reads_the_ledger(db_dsn):
    conn = await asyncpg.connect(db_dsn)
    try:
        await conn.execute(
            """INSERT INTO llm_calls (provider, model, purpose, tokens_in, tokens_out, cost_usd, ok)
               VALUES ('gemini', 'gemini-2.5-flash-lite', 'system1', 1000, 200, 0.00018, true),
                      ('anthropic', 'claude-sonnet-4-5', 'system2', 500, 100, 0.003, false)""")
    finally:
        await conn.close()
    result = run_agent(b"/cost\n/quit\n", agent_env(DATABASE_URL=db_dsn))
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    table = out[out.index("last 24 h"):].splitlines()
    rows = {line.split()[0]: line.split() for line in table[1:] if line.split()[0] in
            ("gemini-2.5-flash-lite", "claude-sonnet-4-5", "total")}
    # rows from before this session: 0 in the session window, counted in 24 h and lifetime
    assert rows["gemini-2.5-flash-lite"][2:] == ["0", "$0.0000", "1", "$0.0002", "1", "$0.0002", "0", "0"]
    assert rows["claude-sonnet-4-5"][-2:] == ["1", "0"]  # failed calls, cancelled calls
    assert rows["total"][-4] == "2"              # lifetime calls


def test_status_shows_safety_phases_from_config(db_dsn, tmp_path):
    config = tmp_path / "runtime.yaml"
    config.write_text("safety:\n  phase_b: shadow\n")    # the default is enforced; shadow still selectable
    result = run_agent(b"/status\n/quit\n", agent_env(DATABASE_URL=db_dsn), ("--config", str(config)))
    assert result.returncode == 0, result.stderr.decode()
    assert "safety: phase A enforced, phase B shadow, phase C shadow" in result.stdout.decode().splitlines()
