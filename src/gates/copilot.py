"""Copilot mode: what the exit gate is unsure of waits for the guardian (issue 17).

Unsure, here: an item whose matrix cell is `buffer` (peripheral relevance, novel —
the gate's own "undecided"), or whose contradiction only the LLM judged (layers 1
and 2 could not tell). Such an item is *held* instead of written: its scratch row
stays unflushed and every flush skips it, so nothing is persisted until the
guardian answers. A crash loses nothing: the row is still unflushed and start-up
recovery evaluates (and, in copilot, holds) it again.

The question is asked after an answer, never in the middle of one: the loop asks
for it once it has delivered a reply to the user (`question`), and the next user
line that reads as an answer — `y`, `n`, or item numbers — is consumed as the
confirmation (`take`). Any other line closes the question (the items stay held and
are asked about again after the next answer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from src.gates.evaluation import Evaluation
from src.gates.matrix import PERSISTING

QUESTION = "Keep these? (y/n/numbers)"
PREVIEW_CHARS = 100
_YES = {"y", "yes", "keep", "all"}
_NO = {"n", "no", "none", "drop"}
_NUMBERS = re.compile(r"^\d+(?:\s*[,\s]\s*\d+)*$")


@dataclass
class Held:
    """A held item, what keeping it means (`action`), and why it was held."""

    evaluation: Evaluation
    action: str          # persist | persist_flag
    why: str


@dataclass(frozen=True)
class Settlement:
    """The guardian's answer, resolved: what to keep and what to drop."""

    keep: list[Held]
    drop: list[Held]


def unsure(e: Evaluation) -> str | None:
    """Why the gate is unsure of `e` (None: it is sure, or nothing would be written)."""
    if e.cell.action not in PERSISTING and e.cell.action != "buffer":
        return None
    if e.novelty == "contradicting" and e.decided_by is not None and e.decided_by[1].layer == "llm":
        return "contradiction judged by the language model"
    if e.cell.cell_action == "buffer":
        return "undecided"
    return None


def _preview(text: str) -> str:
    flat = " ".join("".join(ch for ch in text if ch.isprintable() or ch.isspace()).split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


class Confirmations:
    """The held items of one running mind and the open question about them."""

    def __init__(self) -> None:
        self._held: dict[int, Held] = {}        # scratch id -> held item, in arrival order
        self._asked: set[int] = set()
        self._question: list[int] | None = None  # scratch ids numbered in the open question

    def __len__(self) -> int:
        return len(self._held)

    def held_ids(self) -> list[int]:
        """Scratch ids every flush must skip."""
        return list(self._held)

    def hold(self, evaluations: list[Evaluation]) -> list[Evaluation]:
        """Keep the unsure items back; return the ones to write now."""
        now: list[Evaluation] = []
        for e in evaluations:
            why = unsure(e)
            if why is None:
                now.append(e)
                continue
            action = "persist" if e.cell.action == "buffer" else e.cell.action
            self._held[e.item.id] = Held(e, action, why)
        return now

    @property
    def open(self) -> bool:
        return self._question is not None

    def question(self) -> str | None:
        """The question to ask after an answer, when something new is held; else None."""
        if not self._held or set(self._held) <= self._asked:
            return None
        self._question = list(self._held)
        self._asked.update(self._question)
        lines = ["Memories I am unsure of:"]
        lines += [f"  {n}. [{self._held[sid].why}] {_preview(self._held[sid].evaluation.item.content)}"
                  for n, sid in enumerate(self._question, 1)]
        lines.append(QUESTION)
        return "\n".join(lines)

    def take(self, line: str) -> Settlement | str | None:
        """Read the next user line against the open question.

        A Settlement when it answers; a string (the reply) when it looks like an answer
        but names an item that is not listed; None when it is not an answer — the
        question then closes and the line is an ordinary message.
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
            self._question = None
            self._asked.clear()          # ask again after the next answer
            return None
        self._question = None
        settled = Settlement([self._held[s] for s in ids if s in chosen],
                             [self._held[s] for s in ids if s not in chosen])
        for sid in ids:
            del self._held[sid]
            self._asked.discard(sid)
        return settled
