"""After delivery (plan §2.9, §3.3, §3.4 step 5): what the answered exchange leaves behind.

Gate and store. The mind's own answer goes through the entry gate like every input,
into the scratch buffer. The store step is the scratch flush: it runs in the
background (`ScratchLifecycle`, src/gates/scratch.py), where the exit gate decides
each buffered row and the store writes the memories in one transaction. The cycle
starts it after this step every `gates.scratch.flush_every` exchanges, counted as user
messages pass the entry gate (`ScratchLifecycle.flush_if_due`: in a burst the flush
starts after the first answer, not after the last), and it runs at shutdown and, for
what a crash left, at start-up. Both sides of
the exchange join the conversation window; pruning it by intensity gives the exit
gate a last look, here in the cycle, at what the entry gate skipped (what it
buffered, the flush judges).

Who said it, and what stays internal (issue 27). The answer is kept as the mind's
own: `internal_self` when it was said to the user, `internal_thought` when it was not
(an answer to a thought of its own that stayed internal) — src/recall/speakers.py
shows them as "I said: …" and "I thought: …". A failure or reflex notice
(src/loop/degraded.py, also a model's copy of one) is never kept: not gated, not in the
window. A thought of the mind's own (DMN, consolidation, gut, scheduled) enters the
window framed as one, with the answer it got marked as a thought unless it was said;
a thought that got no answer in words leaves nothing in the window.

Split from the loop so that a failure here is clearly after the reply went out
(issue 11: delivered once): the loop logs it as an outage and writes the cycle's row.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np

from src.context.fifo import FifoSettings, IntensitySignals, Message, intensity, system2_recency
from src.gates.memory_gate import Gates
from src.loop.acting import Action, Say
from src.loop.attending import Attended
from src.loop.composing import Prompt
from src.loop.conversation import Conversation
from src.loop.degraded import is_failure_notice
from src.loop.inner_life import CycleOutcome, InnerLife, Submit
from src.loop.thinking import Thought
from src.loop.thought_log import CycleRecord
from src.loop.turn_tasks import TurnTasks
from src.outcomes import use
from src.recall.speakers import SAID_TAG, THOUGHT_TAG
from src.skills.recall_skill import SkillRecall


class Aftermath:
    """The steps after delivery: follow-ups of the answer, gate and store, inner life."""

    def __init__(self, gates: Gates, conversation: Conversation, fifo: FifoSettings, *, say: Say,
                 skills: SkillRecall | None = None, inner: InnerLife | None = None,
                 submit_inner: Submit | None = None):
        self.gates = gates
        self.conversation = conversation
        self.fifo = fifo
        self.say = say
        self.skills = skills
        self.inner = inner
        self.submit_inner = submit_inner     # the loop's way in for the inner life's impulses

    def question(self, attended: Attended, action: Action) -> str | None:
        """Copilot: the question about held memories, decided as the answer is ready and
        asked after it (`answered`) — before a journaled turn's row is written ahead of the
        reply (cycle_log.py): a background flush finishing during that write would otherwise
        move the question one answer earlier than before."""
        if action.delivered and attended.winner.source == "user":
            return self.gates.confirmation_question()
        return None

    def unask(self, question: str | None) -> None:
        """The answer was not delivered after all (its row failed): ask after the next one."""
        if question:
            self.gates.exit.confirmations.reask()

    async def answered(self, thought: Thought, action: Action, question: str | None) -> None:
        """Once the answer is out: credit recalled skills (a model's answer was delivered);
        in copilot, ask the guardian about held memories — after the answer, never in the
        middle of one."""
        if self.skills is not None:
            await self.skills.credit_use(action.delivered and thought.outcome is not None)
        if question:
            await self.say(question)

    async def gate_and_store(self, attended: Attended, prompt: Prompt, thought: Thought, record: CycleRecord,
                             now: datetime, tasks: TurnTasks) -> None:
        """The answer through the entry gate (the scratch flush, started by the cycle's store
        step, stores it: src/gates/scratch.py); the exchange into the window, whose pruning
        is the exit gate's last look at what the entry gate skipped."""
        # which memories the answer drew on (§5.3, src/outcomes/use.py) is independent of the
        # gate and the window: it runs beside them (its words while the gate's row is written)
        uses = None if self.inner is None else tasks.spawn(use.after_answer(
            self.inner.pool, self.inner.outcomes.use, self.inner.session_id, record, prompt.assembled,
            modelled=answered_in_words(record, thought), now=now), "uses")
        try:
            answer_kept = await self._gate_answer(attended, record, thought)
            await self._keep_in_window(attended, prompt, thought, record, answer_kept, now)
        except BaseException:
            if uses is not None:
                uses.cancel()
            raise
        if uses is not None:
            await uses

    async def _gate_answer(self, attended: Attended, record: CycleRecord, thought: Thought) -> bool:
        """The mind's own words go through the same gate as everything else, kept with this
        cycle's focus; True when the answer is in the scratch buffer. A reflex reply (no
        model) only lists recall, and a failure notice is the loop's, not the mind's: nothing
        to keep."""
        if not answered_in_words(record, thought):
            return False
        kept = await self.gates.admit(record.output, source_tag=answer_tag(record),
                                      source_confidence=round(record.confidence or 0.5, 3), exchange=False,
                                      unkept=record.winner.unkept, focus=attended.focus)
        return kept.scratch_id is not None

    async def _keep_in_window(self, attended: Attended, prompt: Prompt, thought: Thought, record: CycleRecord,
                              answer_kept: bool, now: datetime) -> None:
        """Both sides into the window, the focus into the recent context, pruning by intensity."""
        window, winner = self.conversation.window, attended.winner
        answered = answered_in_words(record, thought)
        # Pruning gives the exit gate a last look only at what the entry gate skipped;
        # what it buffered is judged by the scratch flush already (plan §2.9, §3.3). An
        # off-mode turn never reaches the exit gate, even after the mode is switched back.
        if winner.source == "user" or answered:      # a thought that got no words leaves nothing
            await window.add("user", prompt.user_text, source_tag=winner.source_tag, at=now,
                             words=winner.text if prompt.user_text != winner.text else None,
                             metadata={"gated": attended.inputs.buffered or winner.unkept},
                             context=prompt.context)
        if answered:
            await window.add("assistant", record.output, source_tag=answer_tag(record), at=now,
                             metadata={"gated": answer_kept or winner.unkept})
        if thought.escalated_at is not None:
            self.conversation.last_system2 = thought.escalated_at
        level = self._intensity(attended, record, now)
        self.conversation.attended_to(winner.embedding)
        await window.prune(level)

    def _intensity(self, attended: Attended, record: CycleRecord, now: datetime) -> float:
        """The FIFO's intensity (§3.3). Its "average gate score": how strongly this input
        engaged memory — the mean weighted recall score of what was retrieved (0 when nothing was)."""
        engaged = [m.weighted for m in record.retrieval.memories] if record.retrieval else []
        return intensity(IntensitySignals(
            gate_score=float(np.clip(np.mean(engaged), 0.0, 1.0)) if engaged else 0.0,
            system2_recency=system2_recency(self.conversation.last_system2, now, self.fifo.system2_half_life_s),
            goal_relevance=float(next((s.components.goal_relevance for s in attended.allocation.ranked), 0.0)),
            emotional_charge=attended.winner.emotional_charge), self.fifo)

    async def inner_life(self, record: CycleRecord, thought: Thought, now: datetime, tasks: TurnTasks, *,
                         own_scratch: Sequence[int] = ()) -> None:
        """Gut, outcomes and readiness after the cycle (src/loop/inner_life.py); the gut delta
        itself is written with the cycle's row. The turn's queued writes are settled before a
        step that reads weights (`tasks`). `own_scratch`: the turn's own scratch rows (a memory
        stored from them is the question, never a retrieval success)."""
        if self.inner is None:
            return
        await self.inner.after_cycle(
            CycleOutcome(record.cycle, record.winner, record.output, record.path, record.actions,
                         thought.outcome.correction_id if thought.outcome else None, record.retrieval, now,
                         own_scratch=tuple(own_scratch)),
            settled=tasks.settle, submit=self.submit_inner)


def answered_in_words(record: CycleRecord, thought: Thought) -> bool:
    """A model answered, and not with (a copy of) a failure notice: words of the mind's own."""
    return bool(record.output) and thought.outcome is not None and not is_failure_notice(record.output)


def answer_tag(record: CycleRecord) -> str:
    """The answer's source tag: said to the user, or only thought."""
    return SAID_TAG if record.delivered else THOUGHT_TAG


async def gate_pruned(gates: Gates, messages: Sequence[Message]) -> None:
    """Pruned messages get the exit gate before they leave the window (§3.3): their words,
    without the window's frame or mark."""
    by_tag: dict[str, list[Message]] = {}
    for m in messages:
        if not m.metadata.get("gated"):  # a retry after a partial failure skips what passed
            by_tag.setdefault(m.source_tag, []).append(m)
    for tag, group in by_tag.items():
        await gates.prune([m.said for m in group], source_tag=tag)
        for m in group:
            m.metadata["gated"] = True
