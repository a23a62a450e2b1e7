"""What the exit gate works out for one buffered item (plan §2.8): the shared types of
src/gates/exit.py (which scores) and src/gates/record.py (which writes)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from src.gates.contradiction import Verdict
from src.gates.matrix import CellDecision
from src.gates.scratch import BufferedItem
from src.gates.utterance import Utterance
from src.recall.activation import ActivationResult


@dataclass(frozen=True)
class Neighbour:
    """A memory (or an earlier item of the chunk) close to the item being judged."""

    similarity: float
    content: str
    memory_id: int | None = None
    batch_index: int | None = None
    users: bool = False                 # the user's own line (a stored one, or one of the chunk)


@dataclass
class Evaluation:
    """Everything the gate worked out for one item; written as one decision row."""

    item: BufferedItem
    vec: np.ndarray
    act: ActivationResult
    floor: float
    relevance: float
    nearest: Neighbour | None
    band: str
    charge: float
    maturity: float
    verdicts: list[tuple[Neighbour, Verdict]] = field(default_factory=list)
    decided_by: tuple[Neighbour, Verdict] | None = None
    novelty: str = "novel"
    cell: CellDecision | None = None
    compressed: str | None = None
    compressed_by: str = "fallback"
    llm_calls: int = 0
    memory_id: int | None = None            # the row this decision wrote or touched
    outcome: dict | None = None             # the weight choke point's answer, if any
    utterance: Utterance | None = None      # the user's kind of line (statement sources only)
    # the user's older statements this one may update (src/gates/updates.py), and the one it
    # does with why: written as a `memory_supersedes` 'update' link when the item persists
    earlier: list[Neighbour] = field(default_factory=list)
    update_of: Neighbour | None = None
    update_reason: str = ""
    # the older statement the offline judge picked, and why: marked as `update_of` at once in
    # reflex mode; with a model, only when the model's relation question did not answer it
    update_offline: tuple[Neighbour, str] | None = None
    updated_by: Neighbour | None = None     # a statement said after this one that updates it

    @property
    def round(self) -> int:
        return self.item.rounds + 1

