"""Run `python -m src.main` as a subprocess the way an operator would."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import yaml

ROOT = Path(__file__).resolve().parents[1]
READY = "Type /help for commands."


_LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR|CRITICAL) ")


def start_up_lines(err: str) -> list[str]:
    """The start-up lines in a run's stderr (a piped stdout holds only the conversation),
    without the log lines between them (MOLTBOT_LOG_FILE=-)."""
    return [line for line in err.splitlines() if not _LOG_LINE.match(line)]


def agent_env(**extra: str) -> dict[str, str]:
    """A clean environment: no API keys leak in from the developer's shell. No log file
    (MOLTBOT_LOG_FILE=-): the suite must not fill the developer's data/moltbot.log, and a
    failing test shows the child's whole log in its stderr; a test of the file sets one."""
    env = {k: v for k, v in os.environ.items()
           if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")}
    env["MOLTBOT_LOG_FILE"] = "-"
    env.update(extra)
    return env


def set_key(runtime: dict, dotted: str, value: object) -> dict:
    """`runtime` with `dotted` (e.g. "gates.exit.noise_floor") set to `value`, making the
    sections on the way: the shipped runtime.yaml names only what a guardian sets."""
    *parents, key = dotted.split(".")
    holder = runtime
    for part in parents:
        holder = holder.setdefault(part, {})
    holder[key] = value
    return runtime


def shipped_config() -> dict:
    """The shipped runtime.yaml as a dict."""
    return yaml.safe_load((ROOT / "runtime.yaml").read_text(encoding="utf-8")) or {}


def noiseless_config(tmp_path: Path) -> Path:
    """The shipped runtime.yaml with the exit gate's noise floor at 0, written under `tmp_path`.

    The noise floor defers a persisting cell to the buffer 5% of the time, drawn from a
    generator the subprocess seeds from the OS; a test that asserts a message became a
    memory would then fail ~5% of runs. With the floor at 0 the gate's decision is the
    matrix cell alone; everything else is what the operator runs.
    """
    runtime = set_key(shipped_config(), "gates.exit.noise_floor", 0.0)
    path = tmp_path / "runtime.yaml"
    path.write_text(yaml.safe_dump(runtime), encoding="utf-8")
    return path


def run_agent(stdin: bytes, env: dict[str, str], args: tuple[str, ...] = (), timeout: float = 60):
    return subprocess.run([sys.executable, "-m", "src.main", *args], input=stdin, cwd=ROOT,
                          env=env, capture_output=True, timeout=timeout)


def run_memory_cli(args: tuple[str, ...], env: dict[str, str], timeout: float = 120):
    """`python -m src.memory ARGS` as the guardian runs it from a shell."""
    return subprocess.run([sys.executable, "-m", "src.memory", *args], cwd=ROOT, env=env,
                          capture_output=True, timeout=timeout)


def spawn_agent(env: dict[str, str], args: tuple[str, ...] = ()) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "src.main", *args], cwd=ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def read_until(proc: subprocess.Popen, done, timeout: float = 60, *, stream: str = "stdout") -> list[str]:
    """Lines of `stream` (the conversation's stdout, or stderr) up to and including the first
    for which `done(line)` holds."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    source = getattr(proc, stream)
    while time.monotonic() < deadline:
        line = source.readline().decode()
        if not line:
            rest = "" if stream == "stderr" else proc.stderr.read().decode()[-2000:]
            raise AssertionError(f"agent exited: {lines} / {rest}")
        lines.append(line.rstrip("\n"))
        if done(lines[-1]):
            return lines
    raise AssertionError(f"not seen in {timeout}s: {lines}")


def wait_ready(proc: subprocess.Popen, timeout: float = 60) -> list[str]:
    """Read the start-up lines until the ready line; return them. They are on stderr: a
    piped stdout holds only the conversation (src/repl.py `Screen.note`). Log lines there
    too (MOLTBOT_LOG_FILE=-) come along."""
    return read_until(proc, lambda line: READY in line, timeout, stream="stderr")


async def set_outage(admin_dsn: str, db: str, on: bool) -> None:
    """An outage of one database: refuse new connections and end the open ones (or undo it).
    Used by the durability tests and the input benchmark."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f'ALTER DATABASE "{db}" ALLOW_CONNECTIONS {"false" if on else "true"}')
        if on:
            await conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE datname = $1 AND pid <> pg_backend_pid()", db)
    finally:
        await conn.close()
