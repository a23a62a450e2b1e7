"""A detached mind (issue 41 item 4): started as `docker compose up -d` starts it — no tty,
stdin /dev/null — it does not read end of input and shut down; it keeps running, answers
over the HTTP API, and stops on SIGTERM. Without a way in (the view off) it refuses to
start, before its database."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time

import aiohttp
import pytest

from src.detached import reads_stdin
from tests.proc import READY, ROOT, agent_env
from tests.web_service import write_config

URL = re.compile(r"web view \(read-only\): (http://\S+/)")


def test_dev_null_and_a_closed_stdin_are_nobody_a_pipe_is_somebody():
    with open(os.devnull, "rb") as null:
        assert reads_stdin("auto", null.fileno()) is False
        assert reads_stdin("read", null.fileno()) is True
    r, w = os.pipe()
    try:
        assert reads_stdin("auto", r) is True            # `printf … | make run`: a conversation
        assert reads_stdin("ignore", r) is False
    finally:
        os.close(r)
        os.close(w)
    assert reads_stdin("auto", r) is False               # closed
    tty = os.open("/dev/tty", os.O_RDONLY) if os.path.exists("/dev/tty") and os.isatty(0) else None
    if tty is not None:
        assert reads_stdin("auto", tty) is True
        os.close(tty)


def _spawn(env: dict[str, str]) -> subprocess.Popen:
    # stdout and stderr together: the start-up lines may go to either
    return subprocess.Popen([sys.executable, "-m", "src.main"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def _lines_until(proc: subprocess.Popen, marker: str, timeout: float = 120) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode()
        if not line:
            raise AssertionError(f"the mind exited: {lines}")
        lines.append(line.rstrip("\n"))
        if marker in line:
            return lines
    raise AssertionError(f"{marker!r} not seen: {lines}")


async def test_with_stdin_at_dev_null_it_keeps_running_and_answers_over_the_api(db_dsn, tmp_path):
    config = write_config(tmp_path)
    proc = _spawn(agent_env(DATABASE_URL=db_dsn, MOLTBOT_CONFIG=str(config)))
    try:
        lines = _lines_until(proc, "no terminal input (detached)")
        url = next(m.group(1) for line in lines if (m := URL.search(line)))
        assert any(READY in line for line in lines)
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{url}api/v1/messages", json={"text": "My sister Maren lives in Porto.",
                                                                 "wait_s": 60}) as r:
                sent = await r.json()
            assert r.status == 200 and sent["state"] == "answered" and sent["reply"], sent
            async with http.get(f"{url}api/v1/status") as r:
                assert r.status == 200
        health = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "src.health"], cwd=ROOT,
                                         capture_output=True, timeout=60,
                                         env=agent_env(MOLTBOT_CONFIG=str(_with_port(config, url))))
        assert health.returncode == 0 and health.stdout.decode().strip() == "healthy", health.stderr
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=60)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, rest
    assert "shutting down" in rest and "Traceback" not in rest


def _with_port(config, url: str):
    """The test config with the port the service bound (it asked for port 0)."""
    port = int(url.rstrip("/").rsplit(":", 1)[1])
    text = config.read_text().replace("port: 0", f"port: {port}")
    out = config.with_name("health.yaml")
    out.write_text(text)
    return out


@pytest.mark.parametrize(("env", "says"), [
    ({"MOLTBOT_WEB_HOST": "0.0.0.0"}, "MOLTBOT_WEB_TOKEN is not set"),
    ({"MOLTBOT_STDIN": "ignore"}, "web.enabled is false"),
])
def test_a_detached_mind_nothing_could_reach_refuses_before_its_database(db_dsn, tmp_path, env, says):
    config = tmp_path / "runtime.yaml"
    config.write_text("web: {enabled: false}\n" if "MOLTBOT_STDIN" in env else "web: {enabled: true, port: 0}\n")
    proc = _spawn(agent_env(DATABASE_URL=db_dsn, MOLTBOT_CONFIG=str(config), **env))
    out = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 2, out
    assert says in out and "nothing could reach the mind" in out
    assert "database:" not in out and "Traceback" not in out       # refused before the database opened
