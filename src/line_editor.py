"""Line editing and history at the prompt, when a person types at a terminal.

The standard `readline` module (GNU readline), not prompt_toolkit: the prompt needs
editing keys, arrow-key history and a history file, which readline gives for about a
millisecond of import time and no new dependency; prompt_toolkit's session and
`patch_stdout` cost over a hundred milliseconds at every start (measured: notes.md
"### terminal") and a package to keep. Its one advantage, output above a line being
typed without touching it, is done here by hand (`Screen` redraws the prompt and the
typed text under each reply).

Durability is the reader's contract (src/repl.py `start_stdin_reader`): each line goes
through the same delivery, journaled before `input()` is called for the next one, so the
editor runs in its own thread and never reads ahead.

The history file (`agent.history_file`, mode 0600, the newest `HISTORY_LINES`) keeps only
slash commands without arguments. Messages and command arguments (`/forget <words>`,
`/memory <words>`) are the user's words: the mind keeps them where forgetting
(src/erasure) and the memory mode "off" reach them; a file beside the database would be
out of their reach. Within a session every line typed is in the history.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

#: Lines the history file keeps (the newest).
HISTORY_LINES = 500


def kept_in_file(line: str) -> bool:
    """Whether `line` may be written to the history file: a slash command with no argument."""
    text = line.strip()
    return text.startswith("/") and len(text) > 1 and " " not in text


class LineEditor:
    """GNU readline around `input()`: editing, history (in memory; commands in the file)."""

    def __init__(self, history_file: Path | None):
        import readline  # imported here: only a terminal session pays for it

        self.readline = readline
        self.history_file = history_file
        self.editing = threading.Event()      # `input()` is showing the prompt and the typed line
        self._terminal = _terminal_state()
        readline.set_history_length(-1)       # in memory: the whole session
        readline.set_auto_history(False)      # added in `read`, so a blank line is not kept
        if history_file is not None:
            with contextlib.suppress(OSError):      # none yet, or unreadable: start empty
                readline.read_history_file(history_file)

    def read(self, prompt: str) -> str:
        """One line typed at `prompt` (EOFError at Ctrl-D); added to the history."""
        self.editing.set()
        try:
            line = input(prompt)
        finally:
            self.editing.clear()
        if line.strip():
            self.readline.add_history(line)
            if kept_in_file(line):
                self._append(line)
        return line

    def typed(self) -> str:
        """What is typed on the prompt's line now (to draw it again under a reply)."""
        return self.readline.get_line_buffer()

    def close(self) -> None:
        """The terminal as it was found: the reader thread may still be inside readline,
        with echo off, when the process ends."""
        if self._terminal is not None:
            self._terminal()

    def _append(self, line: str) -> None:
        """`line` at the end of the history file, the file cut to `HISTORY_LINES`; only the
        user may read it."""
        path = self.history_file
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            kept = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
            kept = [*kept, line][-HISTORY_LINES:]
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write("\n".join(kept) + "\n")
            os.chmod(path, 0o600)      # a file made before, with a wider mode
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("the prompt's history could not be written to %s: %s", path, exc)


def _terminal_state() -> Callable[[], None] | None:
    """A function that puts stdin's terminal settings back as they are now (None: not a terminal)."""
    try:
        import termios
    except ImportError:          # not a POSIX system: readline is missing there too
        return None
    fd = 0
    try:
        saved = termios.tcgetattr(fd)
    except (termios.error, OSError, ValueError):
        return None

    def restore() -> None:
        with contextlib.suppress(termios.error, OSError, ValueError):
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
    return restore
