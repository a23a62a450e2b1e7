"""Step 2 of a cycle (plan §3.4, §3.10): attend — one winner among everything pending.

The values and goals files are re-read (an edit takes effect this cycle), the gut
charges every candidate, salience allocates, and the winner becomes the cycle's turn
(with the user messages that waited, src/loop/turns.py). Attention changes no other
part: what it found travels in `Attended` — the identity layers as re-read (recall's
cue), and the focus (the winner and the last two foci) under which the cycle stores
the turn's scratch rows for the exit gate, so that what was said here is judged by
it, not by the focus at flush time (src/gates/scratch.py `note_focus`). The cycle
takes the gut's reading from it (plan §5.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from src.gates.memory_gate import Gates
from src.loop.attention_queue import Allocation, Candidate, cognitive_state_report
from src.loop.conversation import Conversation
from src.loop.intake import Intake, TurnInputs
from src.loop.turns import Turn, take_turn
from src.recall.layers import LayerEmbeddings, identity_vectors

if TYPE_CHECKING:
    from src.loop.inner_life import InnerLife


@dataclass(frozen=True)
class Attended:
    """What attention chose for this cycle, and why."""

    cycle: int                          # the cycle's number in this session
    turn: Turn                          # the winner, with the user messages taken with it
    allocation: Allocation              # everyone ranked (thought_log's candidates)
    report: str                         # the cognitive state report for the prompt
    inputs: TurnInputs                  # the turn's scratch rows and journal ids
    goal_vecs: Sequence[np.ndarray]     # the goals layer as this cycle read it
    layer_vecs: Sequence[tuple[np.ndarray, float]] | None = None   # values and goals for recall's S_i
    recent: Sequence[np.ndarray] = ()   # the foci of the cycles before (newest last)
    mode_line: str = ""                 # the memory mode, for the prompt (src/gates/modes.py)

    @property
    def focus(self) -> np.ndarray | None:
        """The attention focus (rows: the winner, then the last two foci); None without a vector."""
        if self.winner.embedding is None:
            return None
        return np.vstack([self.winner.embedding, *self.recent[-2:]]).astype(np.float32)

    @property
    def winner(self) -> Candidate:
        return self.turn.candidate


class Attending:
    """Allocates attention once per cycle; owns the identity vectors and the cycle count."""

    def __init__(self, intake: Intake, conversation: Conversation, gates: Gates, *,
                 layers: LayerEmbeddings | None, inner: InnerLife | None, goal_vecs: Sequence[np.ndarray],
                 combine_max: int):
        self.intake = intake
        self.conversation = conversation
        self.gates = gates
        self.layers = layers
        self.inner = inner
        self.goal_vecs = list(goal_vecs)
        self.layer_vecs: list[tuple[np.ndarray, float]] | None = None   # None: not re-read (no layers)
        self.combine_max = combine_max
        self.cycles = 0

    async def attend(self, now: datetime) -> Attended | None:
        """The cycle's turn; None when nothing is pending."""
        await self._reread_layers()
        queue, recent = self.intake.queue, self.conversation.recent
        if self.inner is not None:
            self.inner.charge_candidates(queue)
        allocation = queue.allocate(recent or None, self.goal_vecs or None)
        if allocation is None or allocation.winner is None:
            return None
        self.cycles += 1
        turn = take_turn(allocation.winner, queue, self.combine_max)
        inputs = self.intake.begin(turn)
        report = cognitive_state_report(allocation, queue.settings)
        return Attended(self.cycles, turn, allocation, report, inputs, tuple(self.goal_vecs),
                        None if self.layer_vecs is None else tuple(self.layer_vecs), tuple(recent),
                        mode_line=self.gates.mode.report_line())

    async def _reread_layers(self) -> None:
        """Values/goals files edited while running take effect now (recall's S_i, salience,
        the gut's layers)."""
        if self.layers is None:
            return
        self.layer_vecs, self.goal_vecs = await identity_vectors(self.layers)
        if self.inner is not None:
            await self.inner.refresh_layers(self.layers)
