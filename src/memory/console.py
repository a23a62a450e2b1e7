"""Printing for the operator: control characters escaped, progress with an ETA.

On a terminal progress is one line rewritten in place; otherwise (a pipe, a log
file) nothing is printed until the final count line, so logs stay readable.
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Callable
from typing import TextIO

from src.text import excerpt as text_excerpt


def printable(text: str) -> str:
    """`text` with control characters (newlines and tabs included) shown as escapes."""
    return "".join(
        ch.encode("unicode_escape").decode("ascii") if unicodedata.category(ch) in ("Cc", "Cf") else ch
        for ch in text
    )


def excerpt(text: str, limit: int = 300) -> str:
    """One printable line of at most `limit` characters."""
    return printable(text_excerpt(text, limit))


def eta_text(done: int, total: int, rate: float) -> str:
    """'ETA 1m05s' from what is left at `rate` per second; '' when unknown."""
    if rate <= 0 or total <= done:
        return ""
    seconds = int(round((total - done) / rate))
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"ETA {hours}h{minutes:02d}m"
    return f"ETA {minutes}m{secs:02d}s" if minutes else f"ETA {secs}s"


def bar_text(label: str, done: int, total: int, rate: float, width: int = 20) -> str:
    """`importing [#####---------------] 500/2000 (312/s, ETA 5s)`."""
    total = max(total, done)
    filled = width if total == 0 else int(width * done / total)
    eta = eta_text(done, total, rate)
    return (f"{label} [{'#' * filled}{'-' * (width - filled)}] {done}/{total} "
            f"({rate:.0f}/s{', ' + eta if eta else ''})")


class Progress:
    """Progress of one long command on `stream`; silent unless it is a terminal."""

    def __init__(self, label: str, total: int, stream: TextIO,
                 clock: Callable[[], float] = time.monotonic):
        self.label = label
        self.total = total
        self.stream = stream
        self.clock = clock
        self.started = clock()
        self.tty = bool(getattr(stream, "isatty", lambda: False)())

    def rate(self, done: int) -> float:
        elapsed = self.clock() - self.started
        return done / elapsed if elapsed > 0 else 0.0

    def update(self, done: int, total: int | None = None) -> None:
        if total is not None:
            self.total = total
        if self.tty:
            self.stream.write("\r" + bar_text(self.label, done, self.total, self.rate(done)))
            self.stream.flush()

    def finish(self) -> float:
        """End the progress line; return the seconds since the start."""
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
        return self.clock() - self.started
