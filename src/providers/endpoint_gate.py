"""One gate per model endpoint: how many requests are in flight, and who goes first.

A local model server answers one request at a time (llama.cpp's server with 4 slots
answered parallel requests with HTTP 500 "Context size has been exceeded"), and a user
who typed waited behind everything the mind had asked it before (issue 27). So every
language-model attempt passes the gate of its endpoint, one per provider kind
(`providers.llm.max_concurrency`: 1 for openai_compat, more for the cloud APIs):

- at most `max_concurrency` attempts are in flight; the others wait;
- waiting attempts go by priority, then first come first served: the user's turn
  (its calls say `caller=USER`, src/providers/caller.py) before the mind's own work (DMN, consolidation, the exit gate's
  micro-calls, skill proposals), which is the default;
- a user attempt that finds every slot taken preempts an internal attempt in flight:
  that attempt ends at once (its timeout scope is moved to now, `Slot.scope`) and, being
  internal, waits again behind the user (Resilience runs it again without spending an
  attempt); the user's attempt takes the freed slot;
- `close_internal()` (shutdown) ends every internal attempt in flight and refuses the
  ones that wait or come later with CallCancelled, so nothing the mind asked itself
  holds the exit; user attempts still pass.

The priority is the call's own: `LanguageModel` methods take `caller=` and the
resilient model hands its priority to `slot` (src/providers/llm.py).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

from src.errors import CallCancelled
from src.providers.caller import Priority

log = logging.getLogger(__name__)

_RANK: dict[str, int] = {"user": 0, "internal": 1}

GAVE_WAY = "gave way to the user's turn"
SHUTTING_DOWN = "the mind is shutting down"


class Slot:
    """One attempt's place at a gate. Preempting it ends the attempt's timeout scope now."""

    def __init__(self, priority: Priority):
        self.priority = priority
        self.preempted: str | None = None     # why it was ended, when it was
        self.final = False                    # True: do not wait again (shutdown)
        self._scope: asyncio.Timeout | None = None

    @asynccontextmanager
    async def scope(self, timeout_s: float | None) -> AsyncIterator[asyncio.Timeout]:
        """The attempt's timeout; a preemption moves it to now (TimeoutError, `preempted` set)."""
        async with asyncio.timeout(timeout_s) as scope:
            self._scope = scope
            if self.preempted is not None:
                self._end_now()
            try:
                yield scope
            finally:
                self._scope = None

    def preempt(self, why: str, *, final: bool = False) -> None:
        if self.preempted is None:
            self.preempted, self.final = why, final
            if self._scope is not None:
                self._end_now()

    def _end_now(self) -> None:
        assert self._scope is not None
        self._scope.reschedule(asyncio.get_running_loop().time())


class EndpointGate:
    """At most `max_concurrency` attempts in flight to one endpoint; the user's first."""

    def __init__(self, endpoint: str, max_concurrency: int):
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.endpoint = endpoint
        self.max_concurrency = max_concurrency
        self.peak = 0                          # most attempts ever in flight at once
        self.preemptions = 0
        self._holders: list[Slot] = []
        self._waiting: list[tuple[int, int, asyncio.Future[None], Slot]] = []   # a heap
        self._order = itertools.count()
        self._closed = False

    @property
    def in_flight(self) -> int:
        return len(self._holders)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def closed(self) -> bool:
        return self._closed

    @asynccontextmanager
    async def slot(self, priority: Priority = "internal") -> AsyncIterator[Slot]:
        """Wait for a place, hold it for the block. Internal calls after `close_internal`
        raise CallCancelled."""
        slot = Slot(priority)
        await self._acquire(slot)
        try:
            yield slot
        finally:
            self._release(slot)

    def close_internal(self) -> None:
        """Shutdown: internal attempts in flight end now, waiting and later ones are refused."""
        self._closed = True
        for slot in self._holders:
            if slot.priority == "internal":
                slot.preempt(SHUTTING_DOWN, final=True)
        for entry in [e for e in self._waiting if e[3].priority == "internal"]:
            self._waiting.remove(entry)
            if not entry[2].done():
                entry[2].set_exception(self._refusal())
        heapq.heapify(self._waiting)

    def _refusal(self) -> CallCancelled:
        return CallCancelled(f"{self.endpoint}: internal call not made: {SHUTTING_DOWN}", provider=self.endpoint)

    async def _acquire(self, slot: Slot) -> None:
        if self._closed and slot.priority == "internal":
            raise self._refusal()
        rank = _RANK[slot.priority]
        if len(self._holders) < self.max_concurrency and not any(e[0] <= rank for e in self._waiting):
            self._hold(slot)
            return
        entry = (rank, next(self._order), asyncio.get_running_loop().create_future(), slot)
        heapq.heappush(self._waiting, entry)
        if slot.priority == "user":
            self._preempt_for_user()
        try:
            await entry[2]
        except BaseException:
            if slot in self._holders:          # granted while being cancelled: pass it on
                self._release(slot)
            elif entry in self._waiting:
                self._waiting.remove(entry)
                heapq.heapify(self._waiting)
            raise

    def _hold(self, slot: Slot) -> None:
        self._holders.append(slot)
        self.peak = max(self.peak, len(self._holders))

    def _release(self, slot: Slot) -> None:
        if slot in self._holders:
            self._holders.remove(slot)
        while self._waiting and len(self._holders) < self.max_concurrency:
            _, _, future, waiter = heapq.heappop(self._waiting)
            if future.done():                  # cancelled while waiting
                continue
            self._hold(waiter)
            future.set_result(None)

    def _preempt_for_user(self) -> None:
        """Every slot taken and a user waits: one internal attempt in flight gives way
        (the newest; the oldest is likelier to finish soon). None in flight: the user
        is next in line anyway."""
        if len(self._holders) < self.max_concurrency:
            return
        users_waiting = sum(1 for e in self._waiting if e[3].priority == "user")
        giving_way = sum(1 for s in self._holders if s.preempted is not None)
        if giving_way >= users_waiting:
            return
        for holder in reversed(self._holders):
            if holder.priority == "internal" and holder.preempted is None:
                log.info("%s: an internal call gives way to the user's turn", self.endpoint)
                self.preemptions += 1
                holder.preempt(GAVE_WAY)
                return


class EndpointGates:
    """The gates of one mind, by provider kind (one endpoint each)."""

    def __init__(self) -> None:
        self._gates: dict[str, EndpointGate] = {}

    def get(self, endpoint: str, max_concurrency: int) -> EndpointGate:
        """The endpoint's gate, made on first use (System 1 and 2 on one server share it)."""
        gate = self._gates.get(endpoint)
        if gate is None:
            gate = self._gates[endpoint] = EndpointGate(endpoint, max_concurrency)
        return gate

    def __iter__(self) -> Iterator[EndpointGate]:
        return iter(list(self._gates.values()))

    def close_internal(self) -> None:
        """Shutdown: the mind's own calls end at every endpoint (see EndpointGate)."""
        for gate in self:
            gate.close_internal()
