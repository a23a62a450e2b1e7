"""What the loop does for the mind between messages, once per cycle (plan §5.1–§5.3).

The cognitive loop calls four hooks; this object owns the rest:
    charge_candidates   before attention: each candidate's emotional charge from the gut
    feel                once the winner is known: this cycle's gut reading (recall's
                        emotional component and the exit gate's charge read it)
    gut_summary         the short gut line for System 1's context
    after_cycle         outcomes (explicit feedback, corrections, goals achieved);
                        readiness milestones 1, 2, 5, 9, 10; gut signals above the
                        threshold become `gut` input (never from a gut-won cycle)
    cycle_writes        the cycle's gut delta, written by the loop in the transaction of
                        the cycle's thought_log row: no commit and pool round trips of
                        its own per cycle (they cost more than the gut's arithmetic, many
                        times more on a loaded machine), and a crash keeps both or neither
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

import numpy as np

from src.bootstrap.milestones import reached, record_milestone
from src.bootstrap.readiness import event_text
from src.bootstrap.settings import BootstrapSettings
from src.errors import ProviderError
from src.gates.modes import unkept_text
from src.gates.utterance import words as utterance_words
from src.gut import repository as gut_repo
from src.gut.gut import Gut
from src.loop.attention_queue import Candidate
from src.loop.prompts import GOAL_ACHIEVED_WHEN
from src.outcomes import alignment, goals
from src.outcomes.prompts import goal_reflection_prompt
from src.outcomes.settings import OutcomeSettings
from src.outcomes.tracking import explicit_feedback, record_outcome
from src.outcomes.use import words as use_words
from src.recall.layer_memories import LayerMemories
from src.recall.retrieval import Retrieval
from src.recall.scoring import Recalled
from src.text import size
from src.tools.verbs import ToolVerb

#: The loop's way in (`CognitiveLoop.submit`, within the background budget): source, text, keywords.
Submit = Callable[..., Awaitable[object]]

log = logging.getLogger(__name__)

_WORDS = re.compile(r"[a-z]{4,}")
_DMN_ITEM = "SELECT id FROM dmn_items WHERE queued AND text = $1 ORDER BY id DESC LIMIT 1"


@dataclass
class _Reflection:
    goal: str
    outcome_id: int
    declared_cycle: int


@dataclass(frozen=True)
class CycleOutcome:
    """What one cycle came to, as the inner life reads it."""

    cycle: int
    winner: Candidate
    answer: str | None
    path: str
    actions: list[dict]
    correction_id: int | None       # System 2's correction kept in the reflection bank
    retrieval: Retrieval | None
    now: datetime
    own_scratch: tuple[int, ...] = ()   # the turn's own scratch rows: a memory stored from them is the question


@dataclass(frozen=True)
class RelevantRecall:
    """A recalled memory that counts as retrieval success (milestone 2), with its measure."""

    memory_id: int
    cosine: float
    floor: float
    shared: tuple[str, ...]          # content words it has in common with the question

    def measure(self, unkept: bool = False) -> str:
        """The measure in words: "cosine 0.62 ≥ 0.35, shares 'cat', 'called'" (an off-mode
        turn's words are not kept: then only how many)."""
        why = (f"shares {len(self.shared)} content word(s) with the question" if unkept
               else "shares " + ", ".join(f"'{w}'" for w in self.shared[:3]))
        return f"cosine {self.cosine:.2f} ≥ {self.floor:.2f}, {why}"


def _own_text(content: str, question: list[str]) -> bool:
    """Whether a memory's words all stand, in order, in the question: its own text (or a
    part of it, or a memory it quotes), not something recalled for it."""
    said = utterance_words(content)
    return not said or f" {' '.join(said)} " in f" {' '.join(question)} "


def relevant_recall(memories: Sequence[Recalled], question: str, *, own_scratch: Sequence[int] = (),
                    floor: float) -> RelevantRecall | None:
    """The best-ranked recalled memory that is retrieval success (plan §5.2 milestone 2), or None.

    The question's own text never counts: a memory stored from this turn's input (its scratch
    rows, `own_scratch`) or one whose words all stand in the question. Of the rest, a learned
    memory (not a seed) counts when its cosine to the question is at least `floor` and it has a
    content word in common with the question. The cosine is the embedding's, not recall's
    blended score: that one is spread over the candidates, so their best is always 1.00. Being
    recall's first is no evidence: a question's best match in an unrelated conversation passes
    the floor about one time in four (notes.md "Thresholds per embedder")."""
    mine, asked = set(own_scratch), utterance_words(question)
    question_words = use_words(question)
    for m in memories:
        cosine = m.hit.similarity
        if (m.hit.immutable or cosine is None or cosine < floor or m.hit.metadata.get("scratch_id") in mine
                or _own_text(m.hit.content, asked)):
            continue
        shared = tuple(sorted(use_words(m.hit.content) & question_words))
        if shared:
            return RelevantRecall(m.id, float(cosine), floor, shared)
    return None


class InnerLife:
    def __init__(self, pool, embedder, *, gut: Gut | None, session_id: str,
                 settings: BootstrapSettings | None = None, outcomes: OutcomeSettings | None = None,
                 layer_memories: LayerMemories | None = None):
        self.pool = pool
        # the layers' entries as value and goal memories (src/recall/layer_memories.py)
        self.layer_memories = layer_memories
        self.embedder = embedder
        self.gut = gut
        self.session_id = session_id
        self.settings = settings or BootstrapSettings()
        self.outcomes = outcomes or OutcomeSettings()
        self.goal_layer: list[tuple[str, np.ndarray]] = []
        self._reached: set[int] | None = None
        self._reflections: dict[str, _Reflection] = {}
        self._since_signal = 10 ** 9
        self._cycle: tuple[int, datetime | None] = (0, None)
        self._felt: int | None = None          # the cycle whose gut reading is current
        self._delta_outcomes: list[int] = []   # outcomes this cycle recorded: linked to its delta

    async def _done(self, number: int) -> bool:
        if self._reached is None:
            self._reached = set(await reached(self.pool))
        return number in self._reached

    async def milestone(self, number: int, event: dict, at: datetime | None = None) -> None:
        """Record milestone `number` once (cached: no query after it is reached)."""
        if await self._done(number):
            return
        if await record_milestone(self.pool, number, event, at=at):
            log.info("readiness milestone %d reached", number)   # what it rests on may quote the user
            log.debug("readiness milestone %d: %s", number, event_text(event))
        self._reached.add(number)

    # -- layers and the gut ---------------------------------------------------------
    async def refresh_layers(self, layers) -> None:
        """L0 values and L1 goals into the gut and, as value and goal memories, the store;
        goal texts kept for matching declarations."""
        if layers is None:
            return
        values = await layers.get_layer_embeddings(0)
        goal_rows = await layers.get_layer_embeddings(1)
        self.goal_layer = [(t, v) for t, _, v in goal_rows]
        if self.layer_memories is not None:
            await self.layer_memories.sync({0: values, 1: goal_rows}, datetime.now(UTC))
        if self.gut is not None:
            self.gut.set_layers([(v, w) for _, w, v in values], [(v, w) for _, w, v in goal_rows])

    def charge_candidates(self, queue) -> None:
        if self.gut is not None:
            queue.raise_charges(self.gut.charge)

    def feel(self, winner_vec: np.ndarray | None, recent: Sequence[np.ndarray], *, cycle: int,
             now: datetime) -> None:
        """This cycle's gut reading; also remembers the cycle for the goal verb."""
        self._cycle = (cycle, now)
        self._delta_outcomes = []
        if self.gut is None:
            return
        focus = ([winner_vec] if winner_vec is not None else []) + list(reversed(recent))
        self._felt = cycle if self.gut.read(focus) is not None else None

    @property
    def emotional(self) -> Callable[[np.ndarray], np.ndarray] | None:
        """The gut's emotional alignment, recall's emotional component (plan §5.1 → §3.1);
        None without a gut."""
        return self.gut.alignment if self.gut is not None else None

    def gut_summary(self) -> str:
        return self.gut.summary() if self.gut is not None else ""

    # -- after the cycle ------------------------------------------------------------
    async def after_cycle(self, outcome: CycleOutcome, *, settled: Callable[[], Awaitable[None]] | None = None,
                          submit: Submit | None = None) -> None:
        """Everything the cycle's outcome means for gut, outcomes and readiness (the delta
        itself is written with the cycle's row: `cycle_writes`). `submit`: the loop's way in
        for a gut signal (the loop hands it in; None: no signal). `settled` waits for the
        turn's writes still running (its retrieval's weight changes, src/loop/turn_tasks.py):
        awaited before the one step here that reads weights (the self-formed values); nothing
        else here reads what those writes change."""
        cycle, winner, answer, path = outcome.cycle, outcome.winner, outcome.answer, outcome.path
        retrieval, now = outcome.retrieval, outcome.now
        correction_id, actions = outcome.correction_id, outcome.actions
        modelled = path not in ("reflex", "system1_failed", "no_answer", "acknowledged") and bool(answer)
        shown = unkept_text(answer) if winner.unkept and answer else answer   # memory mode off: sizes only
        await self._outcomes(winner, correction_id, now)
        if retrieval is not None and not await self._done(2):
            found = relevant_recall(retrieval.memories, winner.text, own_scratch=outcome.own_scratch,
                                    floor=self.settings.relevant_floor(self.embedder.model_name))
            if found is not None:
                await self.milestone(2, {"cycle": cycle, "memory_ids": [found.memory_id],
                                         "recalled": retrieval.ids[:5], "measure": found.measure(winner.unkept),
                                         "query": winner.record_text[:120]}, now)
        if winner.source == "dmn" and modelled and not await self._done(5):
            # only what the DMN generator produced (a goal's reflection prompt also enters as dmn)
            item = await self.pool.fetchval(_DMN_ITEM, winner.text)
            if item is not None:
                await self.milestone(5, {"cycle": cycle, "dmn_item_id": item, "prompt": winner.record_text[:160],
                                         "answer": shown[:160], "path": path}, now)
        if modelled:
            await self._reflected(cycle, winner, shown, now)
            if winner.source != "user":
                await self._alignment(cycle, answer, actions, now, shown=shown, settled=settled)
        await self._gut_signal(winner, now, submit)

    def cycle_writes(self, record) -> list[Callable[[object], Awaitable[object]]]:
        """Writes for the transaction of the cycle's thought_log row (`record`, a CycleRecord):
        this cycle's gut delta with the links of the outcomes the cycle recorded. Empty when
        the cycle took no gut reading. The row is built now; the actions are read when it is
        written, so they match the thought_log row's."""
        cycle, now = self._cycle
        if self.gut is None or self._felt != record.cycle or cycle != record.cycle:
            return []
        r, winner = self.gut.reading, record.winner
        row = gut_repo.DeltaRow(session_id=self.session_id, cycle=cycle, delta=r.delta, magnitude=r.magnitude,
                                context=(winner.record_text or "")[: self.gut.settings.context_chars],
                                action=record.logged_actions, source_tag=winner.source_tag, at=now,
                                outcome_ids=self._delta_outcomes)
        # the row keeps this cycle's outcome list (not reset until the next `feel`): a row that
        # waits for the database links the outcomes after_cycle records meanwhile
        self._felt = None
        return [partial(gut_repo.write_delta, row=row)]

    async def on_persisted(self, memory_ids: list[int]) -> None:
        """The exit gate persisted scratch items as memories: milestone 1."""
        if memory_ids:
            await self.milestone(1, {"memory_ids": memory_ids[:10], "path": "entry → scratch → exit → persist"})

    async def _outcomes(self, winner, correction_id: int | None, now: datetime) -> None:
        cfg = self.outcomes
        # a journaled turn's delta is written with its row before the reply (src/loop/cycle_log.py):
        # the window links it; any other row is written after this, linking `_delta_outcomes`
        if correction_id is not None:
            self._delta_outcomes.append(await record_outcome(
                self.pool, kind="correction", description="System 2 corrected System 1",
                at=now, evidence={"correction_id": correction_id},
                subjects=[("memory", correction_id)], links=cfg))
        if winner.source == "user":
            valence = explicit_feedback(winner.text)
            if valence is not None:
                # the feedback is about what came before this message, not this cycle's reply
                self._delta_outcomes.append(await record_outcome(
                    self.pool, kind="feedback", valence=valence, at=now,
                    description=f"user feedback: {winner.record_text[:200]}", links=cfg))

    async def _reflected(self, cycle: int, winner, answer: str, now: datetime) -> None:
        """Milestone 9 once the reflection prompt of an achieved goal got an answer."""
        reflection = self._reflections.pop(winner.text, None)
        if reflection is not None:
            await self.milestone(9, {"goal": reflection.goal, "outcome_id": reflection.outcome_id,
                                     "declared_cycle": reflection.declared_cycle, "reflection_cycle": cycle,
                                     "reflection": answer[:200]}, now)

    def goal_verb(self, submit: Submit | None = None) -> ToolVerb:
        """`GOAL_ACHIEVED: <goal>` for the loop's tool protocol; offered only when the focus
        shares a word (4+ letters) with a goal the mind holds, so chit-chat never sees it.
        `submit`: the loop's way in for the goal's reflection prompt."""
        def offered(focus: str) -> bool:
            words = set(_WORDS.findall(focus.lower()))
            return any(words & set(_WORDS.findall(text.lower())) for text, _ in self.goal_layer)
        return ToolVerb(verb="GOAL_ACHIEVED", handler=partial(self.declare_goal, submit=submit), usage="GOAL_ACHIEVED: <the goal>",
                        when=GOAL_ACHIEVED_WHEN, offered=offered, kind="internal")

    async def declare_goal(self, text: str, submit: Submit | None = None) -> str:
        """The verb's handler: match a held goal, record the outcome, queue the reflection
        through `submit`."""
        cycle, now = self._cycle
        try:
            [vec] = await self.embedder.embed([text], "RETRIEVAL_QUERY")
        except ProviderError as exc:
            return f"error: the goal could not be matched right now ({exc})"
        held = await goals.goal_memories(self.pool, self.embedder.model_name)
        match = goals.match_goal(vec, self.goal_layer, held, self.settings.goal_match)
        if match is None:
            log.info("the mind declared a goal achieved (%s), but it matches none of its goals", size(text))
            return f"error: '{text[:120]}' matches none of your goals"
        subjects = [("memory", match.memory_id)] if match.memory_id is not None else []
        oid = await record_outcome(self.pool, kind="goal_achieved", at=now, description=f"goal achieved: {match.text}",
                                   evidence={"declared": text, "cycle": cycle, "similarity": round(match.similarity, 4)},
                                   subjects=subjects, links=self.outcomes)
        prompt = goal_reflection_prompt(match.text)
        self._reflections[prompt] = _Reflection(match.text, oid, cycle)
        if submit is not None:
            await submit("dmn", prompt, now=now)
        return f"recorded: your goal '{match.text}' is achieved (outcome {oid}); a reflection on it is queued."

    async def _alignment(self, cycle: int, answer: str, actions: list[dict], now: datetime, *,
                         shown: str, settled: Callable[[], Awaitable[None]] | None = None) -> None:
        """Milestone 10 when the answer aligns with a self-formed value; `shown` is the answer as
        the event keeps it (a placeholder in memory mode off)."""
        if await self._done(10):
            return
        if settled is not None:     # a value's standing is its weights: this cycle's changes first
            await settled()
        values = await alignment.self_formed_values(self.pool, self.embedder.model_name)
        if not values:
            return
        try:
            [vec] = await self.embedder.embed([answer], "RETRIEVAL_QUERY")
        except ProviderError as exc:
            log.warning("could not embed the answer to check value alignment: %s", exc)
            return
        best = alignment.best_aligned(vec, values, self.settings.aligned_similarity)
        if best is None:
            return
        for a in actions:
            a.update(aligned_with_values=True, value_id=best[0])
        await self.milestone(10, {"cycle": cycle, "value_id": best[0], "value": best[1][:160],
                                  "similarity": round(best[2], 4), "answer": shown[:160],
                                  "actions": [a["kind"] for a in actions]}, now)

    async def _gut_signal(self, winner, now: datetime, submit: Submit | None) -> None:
        self._since_signal += 1
        if self.gut is None or submit is None:
            return
        if self.gut.wants_signal(self._since_signal, winner.source):
            self._since_signal = 0
            await submit("gut", self.gut.signal_text(winner.source), now=now,
                              emotional_charge=self.gut.reading.intensity, unkept=winner.unkept)
