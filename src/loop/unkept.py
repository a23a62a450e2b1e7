"""Memory mode off, at the end of a turn: the input journal forgets what was said.

A line typed while the memory mode is off is journaled like any other (src/loop/
input_journal.py): until it is answered, a crash must not lose it. Once its turn is
answered the line has done its job, and the journal keeps only the placeholder the
other tables keep (`unkept_text`, src/gates/modes.py): the count of words and
characters. This runs in the transaction of the cycle's thought_log row and the
journal's "answered" mark (src/loop/cycle_log.py), so an answered line never keeps its
words, and an unanswered one (a crash before the reply was logged) still has them for
the replay, which answers it as an off-mode line again (the scratch row's tag says so).
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from src.gates.modes import unkept_text

_LINES = "SELECT id, line FROM input_journal WHERE id = ANY($1::bigint[]) FOR UPDATE"
_FORGET = "UPDATE input_journal SET line = $2 WHERE id = $1"


async def forget_lines(conn: asyncpg.Connection, ids: Sequence[int]) -> None:
    """Replace the text of the journal lines `ids` with its placeholder (in `conn`'s transaction)."""
    rows = await conn.fetch(_LINES, list(ids))
    await conn.executemany(_FORGET, [(r["id"], unkept_text(r["line"])) for r in rows])
