"""The CLI's console helpers: escaping, progress bar with ETA (pure)."""

from __future__ import annotations

import io

import pytest

from src.memory.console import Progress, bar_text, eta_text, excerpt, printable


@pytest.mark.parametrize(("done", "total", "rate", "text"), [
    (0, 100, 0.0, ""), (50, 100, 10.0, "ETA 5s"), (0, 1300, 10.0, "ETA 2m10s"),
    (0, 36_000, 5.0, "ETA 2h00m"), (100, 100, 10.0, ""),
])
def test_eta_text(done, total, rate, text):
    assert eta_text(done, total, rate) == text


def test_bar_text():
    assert bar_text("importing", 500, 2000, 312.4) == "importing [#####---------------] 500/2000 (312/s, ETA 5s)"
    assert bar_text("re-embedding", 3, 0, 0.0) == "re-embedding [####################] 3/3 (0/s)"


def test_printable_escapes_control_characters():
    assert printable("a\x1b[31mb\nc\td\u200b") == "a\\x1b[31mb\\nc\\td\\u200b"
    assert excerpt("one\n two   three", 9) == "one two…"


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_rewrites_one_line_on_a_terminal_and_is_silent_otherwise():
    clock = iter([0.0, 2.0, 4.0, 5.0]).__next__
    tty = Tty()
    p = Progress("importing", 100, tty, clock=clock)
    p.update(20)
    p.update(40)
    p.finish()
    assert tty.getvalue() == ("\rimporting [####----------------] 20/100 (10/s, ETA 8s)"
                              "\rimporting [########------------] 40/100 (10/s, ETA 6s)\n")
    pipe = io.StringIO()
    q = Progress("importing", 100, pipe, clock=iter([0.0, 1.0, 2.0]).__next__)
    q.update(50)
    q.finish()
    assert pipe.getvalue() == ""
