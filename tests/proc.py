"""Run `python -m src.main` as a subprocess the way an operator would."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READY = "Type /help for commands."


def agent_env(**extra: str) -> dict[str, str]:
    """A clean environment: no API keys leak in from the developer's shell."""
    env = {k: v for k, v in os.environ.items()
           if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")}
    env.update(extra)
    return env


def run_agent(stdin: bytes, env: dict[str, str], args: tuple[str, ...] = (), timeout: float = 60):
    return subprocess.run([sys.executable, "-m", "src.main", *args], input=stdin, cwd=ROOT,
                          env=env, capture_output=True, timeout=timeout)


def spawn_agent(env: dict[str, str], args: tuple[str, ...] = ()) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "src.main", *args], cwd=ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_ready(proc: subprocess.Popen, timeout: float = 60) -> list[str]:
    """Read stdout lines until the ready line; return them."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode()
        if not line:
            raise AssertionError(f"agent exited before ready: {lines} / {proc.stderr.read().decode()}")
        lines.append(line.rstrip("\n"))
        if READY in line:
            return lines
    raise AssertionError(f"agent not ready in {timeout}s: {lines}")
