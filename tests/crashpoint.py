"""`python -m tests.crashpoint POINT N`: `python -m src.main`, killed by SIGKILL at a chosen
point of delivery — just before or just after the N-th reply is written to stdout.

A SIGKILL sent from outside lands at a random point and hit the window between the
print and the journal's "answered" commit in 1 of 12 trials (issue 26); these points
make the window certain. The process kills itself inside the screen's `say`
(src/repl.py `Screen.say`, the loop's `deliver`), the one function every line to the
operator goes through, so the code under test is the shipped one.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

import src.main
import src.repl

REPLY = "(reflex mode — "          # every reply of a mind without a model starts with this
POINTS = ("before_print", "after_print")


def install(point: str, nth: int) -> None:
    """Wrap the screen's `say`: SIGKILL this process at `point` of the `nth` reply."""
    if point not in POINTS:
        raise SystemExit(f"point must be one of {POINTS}, not {point!r}")
    seen = [0]

    def around(text: str, write: Callable[[], None]) -> None:
        is_reply = REPLY in text
        seen[0] += is_reply
        due = is_reply and seen[0] == nth
        if due and point == "before_print":
            os.kill(os.getpid(), signal.SIGKILL)
        write()
        if due and point == "after_print":
            os.kill(os.getpid(), signal.SIGKILL)

    screen = getattr(src.repl, "Screen", None)
    if screen is not None:
        real = screen.say
        screen.say = lambda self, text: around(text, lambda: real(self, text))
    else:   # before the Screen (issue 26's first tree): main.py's module-level `say`
        plain = src.main.say
        src.main.say = lambda text, out=None: around(text, lambda: plain(text, out))


if __name__ == "__main__":
    install(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    sys.exit(src.main.main([]))
