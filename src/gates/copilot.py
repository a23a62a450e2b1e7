"""Copilot mode: what the exit gate is unsure of waits for the guardian (issue 17).

Unsure, here: an item whose matrix cell is `buffer` (peripheral relevance, novel —
the gate's own "undecided"), or whose contradiction only the LLM judged (layers 1
and 2 could not tell). Such an item is *held* instead of written: the flush that
evaluates it writes it to `held_memories` (src/gates/held_repository.py) in the
transaction that decides the rest of its chunk, its scratch row stays unflushed,
and every flush skips it. Nothing is persisted until the guardian answers, and
nothing held is lost: a crash before that commit leaves the row to be evaluated
again; after it, the item is held in the database.

Held items outlive the run. At start-up the items earlier runs held are loaded and
asked about again, marked as from before the restart with their age, whatever the
new start's mode is: in autopilot too, because the guardian's copilot choice
reserved these decisions to the guardian, and a mode switch changes how *new*
items are treated, not who decides the ones already promised to the guardian. In
`off` they are kept and listed (/held) but not asked about — answering would write
while nothing new may be written; they are asked once the mode is on again.

The question is asked after an answer, never in the middle of one: the loop asks
for it once it has delivered a reply to the user (`question`), and the next user
line that reads as an answer — `y`, `n`, or item numbers — is consumed as the
confirmation (`take`). Any other line closes the question (the items stay held and
are asked about again after the next answer). This module is the in-process view of
the held items and of the open question; the database is the record.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from src.gates.evaluation import Evaluation
from src.gates.held import age_text, preview
from src.gates.matrix import PERSISTING

QUESTION = "Keep these? (y/n/numbers)"
_YES = {"y", "yes", "keep", "all"}
_NO = {"n", "no", "none", "drop"}
_NUMBERS = re.compile(r"^\d+(?:\s*[,\s]\s*\d+)*$")


@dataclass(frozen=True)
class Held:
    """A held item as the guardian is asked about it; its evaluation is in the database."""

    scratch_id: int
    content: str
    action: str          # persist | persist_flag: what keeping it writes
    why: str
    held_at: datetime
    earlier: bool = False   # held by an earlier run (loaded at start-up)

    @classmethod
    def from_row(cls, row: Mapping[str, Any], *, earlier: bool) -> Held:
        return cls(row["scratch_id"], row["content"], row["action"], row["why"], row["held_at"], earlier)


@dataclass(frozen=True)
class Settlement:
    """The guardian's answer, resolved: what to keep and what to drop."""

    keep: list[Held]
    drop: list[Held]

    @property
    def ids(self) -> list[int]:
        return [h.scratch_id for h in self.keep + self.drop]


def unsure(e: Evaluation) -> str | None:
    """Why the gate is unsure of `e` (None: it is sure, or nothing would be written)."""
    if e.cell.action not in PERSISTING and e.cell.action != "buffer":
        return None
    if e.novelty == "contradicting" and e.decided_by is not None and e.decided_by[1].layer == "llm":
        return "contradiction judged by the language model"
    if e.cell.cell_action == "buffer":
        return "undecided"
    return None


def split(evaluations: Sequence[Evaluation]) -> tuple[list[Evaluation], list[tuple[Evaluation, str, str]]]:
    """(decide now, hold) of a chunk: each held one with what keeping it means and why."""
    now: list[Evaluation] = []
    held: list[tuple[Evaluation, str, str]] = []
    for e in evaluations:
        why = unsure(e)
        if why is None:
            now.append(e)
        else:
            held.append((e, "persist" if e.cell.action == "buffer" else e.cell.action, why))
    return now, held


class Confirmations:
    """The held items of one running mind and the open question about them."""

    def __init__(self) -> None:
        self._held: dict[int, Held] = {}        # scratch id -> held item, in arrival order
        self._asked: set[int] = set()
        self._question: list[int] | None = None  # scratch ids numbered in the open question

    def __len__(self) -> int:
        return len(self._held)

    def add(self, items: Sequence[Held]) -> None:
        """Items now held in the database (after the commit that holds them)."""
        for h in items:
            self._held[h.scratch_id] = h

    def settled(self, ids: Sequence[int]) -> None:
        """Items decided in the database (after the commit that decides them)."""
        for sid in ids:
            self._held.pop(sid, None)
            self._asked.discard(sid)

    def reask(self) -> None:
        """Close the question; every held item is asked about again after the next answer."""
        self._question = None
        self._asked.clear()

    @property
    def open(self) -> bool:
        return self._question is not None

    def question(self, now: datetime | None = None) -> str | None:
        """The question to ask after an answer, when something new is held; else None."""
        if not self._held or set(self._held) <= self._asked:
            return None
        now = now or datetime.now(UTC)
        self._question = list(self._held)
        self._asked.update(self._question)
        lines = ["Memories I am unsure of:"]
        for n, sid in enumerate(self._question, 1):
            h = self._held[sid]
            when = (f"; from before the restart, held {age_text((now - h.held_at).total_seconds())} ago"
                    if h.earlier else "")
            lines.append(f"  {n}. [{h.why}{when}] {preview(h.content)}")
        lines.append(QUESTION)
        return "\n".join(lines)

    def take(self, line: str) -> Settlement | str | None:
        """Read the next user line against the open question.

        A Settlement when it answers (the items stay held until `settled`); a string
        (the reply) when it looks like an answer but names an item that is not listed;
        None when it is not an answer — the question then closes and the line is an
        ordinary message.
        """
        if self._question is None:
            return None
        text = line.strip().lower()
        ids = [sid for sid in self._question if sid in self._held]
        if text in _YES:
            chosen = set(ids)
        elif text in _NO:
            chosen = set()
        elif _NUMBERS.match(text):
            numbers = {int(n) for n in re.findall(r"\d+", text)}
            bad = sorted(n for n in numbers if not 1 <= n <= len(self._question))
            if bad:
                return (f"there is no item {', '.join(map(str, bad))}; answer y, n or numbers "
                        f"from 1 to {len(self._question)}")
            chosen = {self._question[n - 1] for n in numbers}
        else:
            self.reask()
            return None
        self._question = None
        return Settlement([self._held[s] for s in ids if s in chosen],
                          [self._held[s] for s in ids if s not in chosen])
