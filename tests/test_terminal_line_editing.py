"""The prompt at a terminal (issue 41 item 5): GNU readline's editing keys and history, the
history file (commands without arguments only, mode 0600), replies drawn above the line
being typed; a real `python -m src.main` on a pseudo-terminal."""

from __future__ import annotations

import io
import logging
import os
import stat
import subprocess
import sys
import threading

import yaml

from src.config import Settings
from src.line_editor import HISTORY_LINES, LineEditor, kept_in_file
from src.repl import PROMPT, Screen
from tests.proc import READY, ROOT, agent_env, set_key, shipped_config
from tests.test_conversation_screen import _read_pty


def _config(tmp_path, history):
    runtime = set_key(shipped_config(), "agent.history_file", str(history))
    set_key(runtime, "web.enabled", False)
    path = tmp_path / "runtime.yaml"
    path.write_text(yaml.safe_dump(runtime), encoding="utf-8")
    return path


def test_arrow_up_recalls_a_line_and_the_file_keeps_only_bare_commands(db_dsn, tmp_path):
    history = tmp_path / "history"
    history.write_text("/status\n", encoding="utf-8")          # an earlier session's
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "src.main"], cwd=ROOT,
                            env=agent_env(DATABASE_URL=db_dsn, MOLTBOT_CONFIG=str(_config(tmp_path, history))),
                            stdin=slave, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    try:
        assert _read_pty(master, f"{READY}\r\n{PROMPT}").endswith(f"{READY}\r\n{PROMPT}")
        os.write(master, b"/memory-mode\n")
        assert _read_pty(master, "to change\r\n" + PROMPT).endswith("to change\r\n" + PROMPT)
        os.write(master, b"\x1b[A\n")       # up arrow: the line before, again (not "^[[A")
        again = _read_pty(master, "to change\r\n" + PROMPT)
        assert "^[[A" not in again and again.count("/memory-mode autopilot|copilot|off to change") == 1
        os.write(master, b"\x1b[A\x1b[A\x1b[A\x01\x1b[3~\x1b[3~\x1b[3~\x1b[3~\x1b[3~\x1b[3~\x1b[3~/cost\n")
        assert "No language-model calls recorded yet." in _read_pty(master, "recorded yet.\r\n" + PROMPT)
        os.write(master, b"my secret plans for tuesday\n/memory tuesday\n/quit\n")
        assert "shutting down" in _read_pty(master, "shutting down\r\n")
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        os.close(master)
    # three ups from the empty line reach the earlier session's /status; Ctrl-A, seven deletes
    # and "/cost" typed before the rest make it "/cost" (the command that answered)
    assert history.read_text(encoding="utf-8").splitlines() == ["/status", "/memory-mode", "/memory-mode",
                                                                "/cost", "/quit"]
    assert stat.S_IMODE(history.stat().st_mode) == 0o600


def test_only_slash_commands_without_arguments_go_to_the_file():
    assert [kept_in_file(x) for x in ("/cost", " /held ", "/forget my address", "/memory tea", "hello", "/")] == [
        True, True, False, False, False, False]


def test_the_file_keeps_the_newest_lines(tmp_path):
    history = tmp_path / "deep" / "history"
    editor = LineEditor(history)
    for i in range(HISTORY_LINES + 5):
        editor._append(f"/c{i}")
    lines = history.read_text(encoding="utf-8").splitlines()
    assert (len(lines), lines[0], lines[-1]) == (HISTORY_LINES, "/c5", f"/c{HISTORY_LINES + 4}")


class _Typing:
    """A line editor in the middle of a line: what `Screen` reads of it."""

    def __init__(self, typed: str):
        self.editing = threading.Event()
        self.editing.set()
        self._typed = typed

    def typed(self) -> str:
        return self._typed


def test_a_reply_while_a_line_is_typed_is_drawn_above_it():
    out = io.StringIO()
    screen = Screen(out, prompt=True, editor=_Typing("what is my na"))
    screen.say("the answer")
    assert out.getvalue() == "\r\x1b[Kthe answer\n> what is my na"
    screen.editor.editing.clear()                  # between lines: readline draws the prompt itself
    screen.say("a notice")
    screen.last("shutting down")
    assert out.getvalue().endswith("> what is my na\r\x1b[Ka notice\n\r\x1b[Kshutting down\n")


def test_a_warning_while_a_line_is_typed_is_drawn_above_it_too():
    out = io.StringIO()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    log = logging.getLogger("tests.terminal")
    root = logging.getLogger()
    # this handler alone: a handler an earlier test in the process left on the root draws too
    kept, root.handlers = root.handlers, [handler]
    try:
        Screen(out, prompt=True, editor=_Typing("what is")).take_terminal_log()
        log.warning("database unavailable")
    finally:
        root.handlers = kept
    assert out.getvalue() == "\r\x1b[KWARNING database unavailable\n> what is"


def test_with_a_log_file_only_errors_reach_the_conversation_screen():
    """Issue 38 item 6: a deep pass's warnings were glued into the conversation. With the
    screen level (logging.screen_level, ERROR), a warning stays in the log file; an error
    still shows, drawn above the typed line."""
    out = io.StringIO()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler.setLevel(logging.WARNING)
    log = logging.getLogger("tests.terminal")
    root = logging.getLogger()
    kept, root.handlers = root.handlers, [handler]
    try:
        Screen(out, prompt=True, editor=_Typing("what is")).take_terminal_log(Settings().logging.screen_level)
        log.warning("deep pass 3 questions: skipping an item after repair and split")
        log.error("the database refused the connection")
    finally:
        root.handlers = kept
    assert out.getvalue() == "\r\x1b[KERROR the database refused the connection\n> what is"
