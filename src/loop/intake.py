"""Step 1 of a cycle (plan §3.4, §2.9): take input — the entry gate, then attention.

Every input enters through `Intake.submit`: the entry gate first, so what it keeps is
a scratch_buffer row before any processing, then the attention queue. While the
database is away the input is held in memory, competes for attention meanwhile, and
is offered to the gate again before each cycle (`take`, issue 11: nothing is lost).

An input's life here, until its turn is answered:

    queued     in the attention queue, with its `Admission` (journal id, scratch row)
    in flight  attention took it into this cycle's turn (`begin`); a cycle that fails
               before delivery puts it back (`release`, `requeue`) within the retry
               budget (src/loop/retry.py), or gives it up (`forget`); while the
               database is away it goes back without spending a retry (`put_back`)
               and waits for the database (issue 26)
    settled    its cycle's row and journal mark are written and its reply printed
               (`settle`): never put back, never answered twice
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from src.errors import ProviderError
from src.gates.memory_gate import Gates
from src.loop.attention_queue import AttentionQueue, Candidate
from src.loop.outage import DB_ERRORS, Outage
from src.loop.settings import Source
from src.loop.turns import Turn
from src.providers.protocols import Embedder
from src.text import size

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Origin:
    """Where a user message came from: its input journal row (`ref`; its scratch row carries
    it), whether the entry gate kept it in an earlier run (`gated`: a replay), and its
    channel (terminal, api, page, mcp: its reply goes back there, sql/161)."""

    ref: int | None = None
    gated: bool = False
    channel: str = "terminal"


TYPED = Origin()        # a line typed at the terminal, not journaled (tests, internal impulses)


@dataclass
class Admission:
    """What the input side knows about one queued candidate until its turn is settled."""

    ref: int | None = None          # the input journal id of a user message
    scratch_id: int | None = None   # its scratch_buffer row, when the entry gate kept it
    # kept by the entry gate (in this run or an earlier one): the scratch flush judges it,
    # so the window's pruning must not hand it to the exit gate a second time
    buffered: bool = False


@dataclass(frozen=True)
class TurnInputs:
    """What the messages of a turn bring along from the entry gate and the journal."""

    scratch_ids: tuple[int | None, ...]    # one per part; None: the entry gate skipped it
    refs: tuple[int, ...]                  # input journal ids, marked answered with the cycle's row
    buffered: bool                         # every part is in the scratch buffer

    @property
    def kept(self) -> list[int]:
        """The turn's own scratch rows (recall leaves them out: they are the question)."""
        return [i for i in self.scratch_ids if i is not None]


class Intake:
    """The input side of the loop: entry gate, attention queue, the turn in flight."""

    def __init__(self, queue: AttentionQueue, gates: Gates, embedder: Embedder, outage: Outage):
        self.queue = queue
        self.gates = gates
        self.embedder = embedder
        self.outage = outage
        self.held: list[Candidate] = []            # not yet seen by the entry gate (database away)
        self.admissions: dict[int, Admission] = {}  # candidate id -> what it brought
        self.attempts: dict[int, int] = {}          # candidate id -> failed cycles so far
        self.in_flight: Turn | None = None          # the turn of the running cycle, until delivered
        # set when a turn settles or a part is given up: what `until_answered` waits on
        self._settled = asyncio.Event()

    async def submit(self, source: Source, text: str, *, now: datetime | None = None,
                     emotional_charge: float = 0.0, urgency: float | None = None,
                     origin: Origin = TYPED, unkept: bool = False) -> Candidate | None:
        """Entry gate first (nothing is lost), then the attention queue. None: skipped.

        `origin`: a user message's journal row, replay state and channel;
        `unkept`: it was said while the memory mode was off (a replayed line, or what an
        off-mode turn raised) — as is everything submitted while the mode is off now."""
        candidate = self.queue.stamp(replace(
            Candidate.of(source, text, enqueued_at=now or datetime.now(UTC), urgency=urgency,
                         emotional_charge=emotional_charge, settings=self.queue.settings),
            unkept=unkept or self.gates.mode.off, channel=origin.channel))
        ref = origin.ref
        admission = Admission(ref=ref, buffered=origin.gated)
        if not origin.gated:
            try:
                kept = await self._admit(candidate, ref)
            except DB_ERRORS as exc:
                # The database is away (restarting?): hold the input in memory, offer it to the
                # gate again before the next cycle, and let it compete for attention meanwhile.
                self.outage.down("entry gate", exc)
                self.held.append(candidate)
            else:
                if kept is None and source != "user":
                    return None  # a skipped internal impulse does not compete for attention
                admission.scratch_id, admission.buffered = kept, kept is not None
        self.admissions[candidate.id] = admission
        evicted = self.queue.push(candidate)
        if evicted is not None:
            # the log never holds what was said or thought (issue 39): its size, the words at DEBUG
            log.info("attention queue full: dropped a %s candidate (%s)", evicted.source, size(evicted.record_text))
            log.debug("dropped candidate: %r", evicted.record_text[:60])
            self.admissions.pop(evicted.id, None)
        return candidate

    async def take(self) -> None:
        """Before attention: held inputs through the entry gate, pending candidates embedded."""
        await self.rebuffer()
        await self.embed_pending()

    async def rebuffer(self) -> None:
        """Inputs that arrived while the database was away go through the entry gate now."""
        while self.held:
            c = self.held[0]
            admission = self.admissions.get(c.id)     # None: evicted or answered meanwhile
            try:
                kept = await self._admit(c, admission.ref if admission else None)
            except DB_ERRORS as exc:
                self.outage.down("entry gate", exc)
                return
            if kept is not None and admission is not None:
                admission.scratch_id, admission.buffered = kept, True
            self.held.pop(0)

    async def _admit(self, c: Candidate, ref: int | None) -> int | None:
        """The entry gate for one candidate; its scratch row, or None when skipped."""
        admitted = await self.gates.admit(c.text, source_tag=c.source_tag, source_confidence=c.source_confidence,
                                          exchange=False, metadata=None if ref is None else {"journal_id": ref},
                                          unkept=c.unkept)
        if c.source == "user":
            self.schedule_flush()
        return admitted.scratch_id

    def schedule_flush(self) -> None:
        """A user message passed the entry gate: one exchange for the scratch lifecycle
        (src/gates/scratch.py). Counted here, as the message arrives, not when its turn is
        answered: the cycle's store step then starts the flush after the first answer of a
        burst (`flush_if_due`), and later questions find those messages as memories
        (tests/test_e2e.py's 20 piped lines, counted after each answer instead: in most runs
        no question recalled a memory; measured: notes.md)."""
        self.gates.lifecycle.note_exchange()

    async def embed_pending(self) -> None:
        """One batch for every candidate without a vector (salience's novelty needs it)."""
        pending = [c for c in self.queue.pending() if c.embedding is None]
        if not pending:
            return
        try:
            vecs = await self.embedder.embed([c.text for c in pending], "RETRIEVAL_QUERY")
        except ProviderError as exc:
            log.warning("could not embed %d attention candidates (salience without novelty): %s",
                        len(pending), exc)
            return
        self.queue.attach_embeddings({c.id: v for c, v in zip(pending, vecs, strict=True)})

    # -- the turn in flight ----------------------------------------------------------
    def begin(self, turn: Turn) -> TurnInputs:
        """Attention took `turn`: it is in flight until delivered or put back."""
        self.in_flight = turn
        admissions = [self.admissions.get(p.id, Admission()) for p in turn.parts]
        return TurnInputs(tuple(a.scratch_id for a in admissions),
                          tuple(a.ref for a in admissions if a.ref is not None),
                          all(a.buffered for a in admissions))

    def settle(self, turn: Turn) -> None:
        """The turn is answered (its row and journal mark are written, its reply printed or
        the printing failed): a failure from here on must not put the turn back."""
        self.in_flight = None
        for part in turn.parts:
            self.attempts.pop(part.id, None)
            self.admissions.pop(part.id, None)
        self._settled.set()

    def release(self) -> Turn | None:
        """The cycle failed: the turn in flight (None: it failed before attention took one)."""
        turn, self.in_flight = self.in_flight, None
        return turn

    def requeue(self, turn: Turn, attempts: int) -> None:
        """Back to attention for another cycle, the failed attempts counted."""
        for part in turn.parts:
            self.attempts[part.id] = attempts
            self.queue.push(part)

    def put_back(self, turn: Turn) -> None:
        """Back to attention with its failed attempts as they were: the database was away,
        which is no fault of the turn's, so it spends no retry."""
        for part in turn.parts:
            self.queue.push(part)

    def forget(self, part: Candidate) -> bool:
        """Give `part` up (retry budget spent); True when the input journal kept it."""
        self.attempts.pop(part.id, None)
        self._settled.set()
        return self.admissions.pop(part.id, Admission()).ref is not None

    def user_messages_waiting(self) -> int:
        """User messages not answered yet: queued, held for the entry gate, or in flight."""
        in_flight = self.in_flight.parts if self.in_flight is not None else ()
        return (self.queue.counts()["user"] + sum(c.source == "user" for c in self.held)
                + sum(p.source == "user" for p in in_flight))

    def waiting_from(self, channel: str) -> int:
        """User messages of `channel` not answered yet: queued, held, or in flight."""
        in_flight = self.in_flight.parts if self.in_flight is not None else ()
        return sum(c.source == "user" and c.channel == channel
                   for c in (*self.queue.pending(), *self.held, *in_flight))

    async def until_answered(self, channel: str, recheck_s: float = 1.0) -> None:
        """Return once no user message of `channel` submitted so far waits: a command typed
        at the terminal waits for the terminal's messages, not for twenty API clients'.

        Woken by each settled turn; re-checked every `recheck_s` as well, because a
        queued message can also leave without a turn (a forget scrubs it from attention)."""
        while self.waiting_from(channel):
            self._settled.clear()
            try:
                await asyncio.wait_for(self._settled.wait(), recheck_s)
            except TimeoutError:
                pass
