"""The operator's prompt: lines from stdin, slash commands, and plain input.

stdin is read by one daemon thread (it works for ttys, pipes and files alike and
never blocks the event loop); lines arrive in an asyncio queue. At a terminal the
thread reads through the line editor (src/line_editor.py: editing keys, history)
instead of os.read; either way each line is journaled before the next is read. Commands
are a small registry so later parts (cost ledger, readiness) plug in without touching
the reader.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TextIO

from src.line_editor import LineEditor
from src.terminal import escape
from src.text import clean_text

log = logging.getLogger(__name__)

EOF_MARK = None  # queued when stdin ends

Handler = Callable[[str], Awaitable[str]]


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    handler: Handler
    # its output comes after the answers to the messages typed before it (issue 41): a
    # command reads the state those turns leave (/cost, /held). /quit does not wait: it
    # says how many it answers first, and "shutting down" comes after the last of them.
    in_order: bool = True


class CommandRegistry:
    def __init__(self) -> None:
        self._commands: dict[str, Command] = {}

    def add(self, name: str, summary: str, handler: Handler, *, in_order: bool = True) -> None:
        self._commands[name] = Command(name, summary, handler, in_order)

    def in_order(self, line: str) -> bool:
        """Whether the command on `line` waits for the answers to the messages before it
        (an unknown command does too: its error is in its place)."""
        command = self._commands.get(line[1:].partition(" ")[0].lower())
        return command is None or command.in_order

    def help_text(self) -> str:
        width = max(len(c) for c in self._commands) + 2
        lines = ["Commands:"]
        lines += [f"  /{c.name:<{width}}{c.summary}" for c in sorted(self._commands.values(), key=lambda c: c.name)]
        lines.append("Anything else is a message to the agent.")
        return "\n".join(lines)

    async def dispatch(self, line: str) -> str:
        name, _, args = line[1:].partition(" ")
        command = self._commands.get(name.lower())
        if command is None:
            return f"unknown command /{name}; type /help for the list"
        return await command.handler(args.strip())


def start_stdin_reader(
    loop: asyncio.AbstractEventLoop,
    queue: asyncio.Queue,
    fd: int | None = None,
    max_chars: int = 1_000_000,
    persist: Callable[[list], Awaitable[list]] | None = None,
) -> threading.Thread:
    """Feed `queue` with raw lines (bytes, no newline) from stdin; EOF_MARK at the end.

    Reads the file descriptor with os.read, not sys.stdin: a daemon thread blocked
    inside the buffered reader holds its lock, and the interpreter aborts at exit.
    A line longer than `max_chars` bytes is dropped and reported as an
    ("oversize", total_bytes) item, so the process never holds more than one line.
    With `persist`, each chunk's lines are handed to it (on the event loop) and the
    reader waits for it before reading on: what it returns is queued instead.
    """
    fd = sys.stdin.fileno() if fd is None else fd
    deliver = _Delivery(loop, queue, persist)

    def run() -> None:
        lines = _LineSplitter(max_chars)
        try:
            while chunk := os.read(fd, 1 << 16):
                deliver(lines.feed(chunk))
        except OSError as exc:
            log.warning("stdin reader stopped: %s", exc)
        deliver(lines.end())
        deliver.put(EOF_MARK)

    thread = threading.Thread(target=run, name="stdin-reader", daemon=True)
    thread.start()
    return thread


def start_terminal_reader(
    loop: asyncio.AbstractEventLoop,
    queue: asyncio.Queue,
    editor: LineEditor,
    max_chars: int = 1_000_000,
    persist: Callable[[list], Awaitable[list]] | None = None,
) -> threading.Thread:
    """`start_stdin_reader` for a person at a terminal: each line through `editor` at the
    prompt, then the same delivery (journaled before the next `editor.read`)."""
    deliver = _Delivery(loop, queue, persist)

    def run() -> None:
        while True:
            try:
                line = editor.read(PROMPT)
            except EOFError:                    # Ctrl-D: the end of input, as a pipe's
                break
            except UnicodeDecodeError as exc:   # bytes the terminal's encoding does not hold
                log.warning("a typed line could not be decoded: %s", exc)
                continue
            except (OSError, ValueError) as exc:
                log.warning("terminal reader stopped: %s", exc)
                break
            raw = line.encode("utf-8", "surrogateescape")
            deliver([raw] if len(raw) <= max_chars else [("oversize", len(raw) + 1)])
        deliver.put(EOF_MARK)

    thread = threading.Thread(target=run, name="terminal-reader", daemon=True)
    thread.start()
    return thread


class _LineSplitter:
    """Bytes in, whole lines out; a line over `max_chars` becomes ("oversize", its bytes)
    without ever being held whole."""

    def __init__(self, max_chars: int):
        self.max_chars = max_chars
        self.pending = bytearray()
        self.oversize = 0          # bytes of a too-long line seen so far; 0 when not in one

    def feed(self, chunk: bytes) -> list:
        """The lines `chunk` completes."""
        self.pending += chunk
        out: list = []
        while (newline := self.pending.find(b"\n")) >= 0:
            line = bytes(self.pending[:newline])
            del self.pending[: newline + 1]
            if self.oversize or len(line) > self.max_chars:
                out.append(("oversize", self.oversize + len(line) + 1))
                self.oversize = 0
            else:
                out.append(line)
        if len(self.pending) > self.max_chars:
            self.oversize += len(self.pending)
            self.pending.clear()
        return out

    def end(self) -> list:
        """The last line, which had no newline (if any)."""
        if self.oversize or len(self.pending) > self.max_chars:
            return [("oversize", self.oversize + len(self.pending))]
        return [bytes(self.pending)] if self.pending else []


class _Delivery:
    """From the reader thread to the event loop's queue, through `persist` (the input
    journal) when given: a line is journaled before the loop sees it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue,
                 persist: Callable[[list], Awaitable[list]] | None):
        self.loop, self.queue, self.persist = loop, queue, persist

    def put(self, item: object) -> None:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # loop closed during shutdown
            pass

    def __call__(self, batch: list) -> None:
        ready = batch
        if self.persist is not None and ready:
            try:
                ready = asyncio.run_coroutine_threadsafe(self.persist(ready), self.loop).result()
            except Exception as exc:  # noqa: BLE001 - the lines still reach the prompt
                log.warning("input could not be journaled: %s", exc)
        for item in ready:
            self.put(item)


def decode_line(raw: bytes) -> tuple[str, list[str]]:
    cleaned = clean_text(raw)
    return cleaned.text, cleaned.notes


def say(text: str, out: TextIO | None = None) -> None:
    """Print one reply for the operator, control characters escaped (src/terminal.py)."""
    out = out or sys.stdout
    out.write(escape(text) + "\n")
    out.flush()


#: Shown where the operator types, when stdin and stdout are a terminal.
PROMPT = "> "
#: Back to the start of the line and clear it: a reply arriving while the prompt waits
#: takes the prompt's place, and the prompt is drawn again under it.
_CLEAR_LINE = "\r\x1b[K"


def interactive(out: TextIO) -> bool:
    """stdin and `out` are both a terminal: a person types and reads there. Piped input
    (tests, scripts) gets no prompt, so stdout is only the lines they parse."""
    try:
        return os.isatty(sys.stdin.fileno()) and out.isatty()
    except (AttributeError, OSError, ValueError):   # a replaced or closed stream
        return False


class _SayLines:
    """A stream for a logging handler whose lines go to `say` (the handler writes a record
    and its newline in one call)."""

    def __init__(self, say: Callable[[str], None]):
        self.say = say

    def write(self, text: str) -> int:
        if text.strip():
            self.say(text.rstrip("\n"))
        return len(text)

    def flush(self) -> None:
        """`say` flushes each line."""


def _is_terminal(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, OSError, ValueError):   # a replaced or closed stream
        return False


class Screen:
    """The conversation screen: every line the operator reads (replies, command output,
    notices) goes through `say`; with a terminal, the prompt follows the last of them.

    The loop delivers replies while the operator may be at the prompt, so a reply first
    clears the prompt's line, then draws the prompt again after itself. `typed` is told
    when a line was entered: the terminal has moved to a new line, no prompt is showing.

    Start-up and shutdown lines (the database, the providers, the web view, the ready
    line) go through `note`: on the screen when `out` is a terminal, else to `status`
    (stderr), so a pipe's stdout holds only the conversation (issue 41).
    """

    def __init__(self, out: TextIO | None = None, *, prompt: bool | None = None,
                 status: TextIO | None = None, editor: LineEditor | None = None):
        self.out = out or sys.stdout
        self.prompt = interactive(self.out) if prompt is None else prompt
        # with the line editor, readline draws the prompt; a reply that arrives while a line
        # is being typed clears it and draws the prompt and the typed text again under itself
        self.editor = editor
        self.status = status if status is not None else (None if _is_terminal(self.out) else sys.stderr)
        self._showing = False       # the prompt is the last thing on the screen

    def note(self, text: str) -> None:
        """A line about the process, not the conversation (start-up, shutdown)."""
        if self.status is None:
            self.say(text)
            return
        self.status.write(escape(text) + "\n")
        self.status.flush()

    def say(self, text: str) -> None:
        """One reply or notice, control characters escaped (src/terminal.py)."""
        if self.editor is not None:
            # the line is cleared also between lines: after Ctrl-D the prompt stays on it
            editing = self.editor.editing.is_set()
            again = PROMPT + escape(self.editor.typed()) if editing and self.prompt else ""
            self.out.write(_CLEAR_LINE + escape(text) + "\n" + again)
            self.out.flush()
            return
        self.out.write((_CLEAR_LINE if self._showing else "") + escape(text) + "\n"
                       + (PROMPT if self.prompt else ""))
        self._showing = self.prompt
        self.out.flush()

    def take_terminal_log(self, level: int | str | None = None) -> None:
        """The log lines meant for this terminal (stderr) are drawn through `say` as well: one
        that comes while a line is typed goes above it, not into it. With `level`, only lines at
        it and above reach the screen (`logging.screen_level`: the rest are in the log file)."""
        for handler in logging.getLogger().handlers:
            if type(handler) is logging.StreamHandler and handler.stream is sys.stderr:
                handler.setStream(_SayLines(self.say))
                if level is not None:
                    handler.setLevel(max(handler.level, logging.getLevelName(level) if isinstance(level, str)
                                         else level))

    def show_prompt(self) -> None:
        """The prompt, when it is not showing already (a line that printed nothing)."""
        if self.prompt and not self._showing and self.editor is None:
            self.out.write(PROMPT)
            self.out.flush()
            self._showing = True

    def typed(self) -> None:
        """A line was entered: the cursor is on a fresh line."""
        self._showing = False

    def close(self) -> None:
        """The terminal as it was found (the line editor's reader may still be in readline)."""
        if self.editor is not None:
            self.editor.close()

    def last(self, text: str) -> None:
        """The last line of the session: no prompt after it."""
        self.prompt = False
        self.say(text)
