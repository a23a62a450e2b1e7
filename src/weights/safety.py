"""Safety ceilings (plan §3.9): all built, enforced in stages, audited always.

Every ceiling runs on every relevant action. A failing check is always written to
`safety_events` with `enforced` saying whether it blocked anything: a ceiling of a
phase that is not yet enforced runs in shadow mode, so the log shows what it *would*
have done before anyone turns it on.

    Phase A (enforced from day one): hard ceiling on a memory's center, goal-weight
        budget, diminishing returns (applied in src/weights/apply.py), audit trail.
    Phase B (enforced by default now that consolidation runs; shadow still selectable):
        rate limiter, Two-Gate guardrail.
    Phase C (shadow until patterns emerge): entropy monitor, circuit breaker,
        CBA coherence.

The rules themselves are pure (src/weights/safety_rules.py). This module owns
which are enforced and the in-process state of the monitors. Every writer of events
keeps them in a list of its own and writes it in its own transaction: the weight
choke point per batch, promotion per step, gate tuning per pass, the Phase C monitors
per pass (src/consolidation/monitors.py) — so no task writes another's events. A
check given no list lands in the shared `pending` list (`write_events` flushes it).
The distribution the entropy monitor reads is src/weights/center_summary.py's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import asyncpg

from src.weights import safety_rules as rules
from src.weights.safety_rules import RuleResult
from src.weights.settings import SafetySettings

log = logging.getLogger(__name__)

Phase = Literal["A", "B", "C"]



@dataclass(frozen=True)
class SafetyEvent:
    """A failed check, waiting to be written to safety_events."""

    ceiling: str
    phase: Phase
    reason: str
    enforced: bool
    memory_id: int | None = None
    action: Mapping[str, Any] = field(default_factory=dict)


class SafetyCeiling:
    """One named ceiling: evaluate, log a failure, block only when enabled (plan §3.9)."""

    def __init__(self, name: str, phase: Phase, enabled: bool, sink: Callable[[SafetyEvent], None]):
        self.name = name
        self.phase = phase
        self.enabled = enabled
        self._sink = sink

    def check(self, result: RuleResult, *, memory_id: int | None = None,
              action: Mapping[str, Any] | None = None,
              events: list[SafetyEvent] | None = None) -> tuple[bool, str]:
        """(passed, reason). A failure is always recorded; it blocks only when enabled.

        `events`: the caller's own list (the weight choke point passes one per batch, so
        its transaction writes exactly its own events); without it, the shared monitor list."""
        if result.passed:
            return True, ""
        event = SafetyEvent(self.name, self.phase, result.reason, self.enabled, memory_id, dict(action or {}))
        if events is not None:
            events.append(event)
        else:
            self._sink(event)
        if self.enabled:
            return False, result.reason
        return True, ""


class Safety:
    """The ceilings of all phases, their monitors' state, and events not yet written."""

    def __init__(self, settings: SafetySettings | None = None):
        self.settings = settings or SafetySettings()
        s = self.settings
        self.pending: list[SafetyEvent] = []
        enabled = {"A": s.phase_a == "enforced", "B": s.phase_b == "enforced", "C": s.phase_c == "enforced"}

        def ceiling(name: str, phase: Phase) -> SafetyCeiling:
            # through self, not a bound list method: take_events swaps the list, and events of
            # later checks must land in the new one
            return SafetyCeiling(name, phase, enabled[phase], lambda event: self.pending.append(event))

        self.hard_ceiling = ceiling("hard_ceiling", "A")
        self.goal_budget = ceiling("goal_budget", "A")
        self.rate_limit = ceiling("rate_limit", "B")
        self.two_gate = ceiling("two_gate", "B")
        self.entropy = ceiling("entropy_monitor", "C")
        self.circuit = ceiling("circuit_breaker", "C")
        self.coherence = ceiling("cba_coherence", "C")
        self._entropy_monitor = rules.EntropyMonitor(window=s.entropy_window,
                                                     drop_fraction=s.entropy_drop_fraction)
        self._breakers: dict[Hashable, rules.CircuitBreaker] = {}
        self._last_coherence: float | None = None

    # -- which phases block -------------------------------------------------------
    def phase_modes(self) -> dict[str, str]:
        s = self.settings
        return {"A": s.phase_a, "B": s.phase_b, "C": s.phase_c}

    def status_line(self) -> str:
        modes = self.phase_modes()
        return "safety: " + ", ".join(f"phase {p} {m}" for p, m in modes.items())

    # -- Phase C monitors (called per consolidation cycle, not per weight change) --
    def observe_pattern(self, actor: str, pattern_key: Hashable | None,
                        evidence_ids: Iterable[Hashable] = (), *,
                        events: list[SafetyEvent] | None = None) -> tuple[bool, str]:
        """Circuit breaker: one call per cycle per actor; False = pause reinforcing that pattern.

        `events`: the caller's own list (a monitor pass writes exactly its own events);
        without it, the shared pending list (as for every observe_*)."""
        breaker = self._breakers.setdefault(actor, rules.CircuitBreaker(self.settings.circuit_breaker_cycles))
        result = breaker.observe(pattern_key, evidence_ids)
        return self.circuit.check(result, action={"actor": actor, "pattern": repr(pattern_key)}, events=events)

    def observe_entropy(self, entropy_bits: float, *, memories: int,
                        events: list[SafetyEvent] | None = None) -> tuple[bool, str]:
        """Entropy monitor: False = the distribution is collapsing; broaden sampling."""
        result = self._entropy_monitor.observe(entropy_bits)
        return self.entropy.check(result, action={"entropy_bits": entropy_bits, "memories": memories},
                                  events=events)

    def observe_coherence(self, epistemic: float, action: float, value: float, *,
                          events: list[SafetyEvent] | None = None) -> tuple[float, bool, str]:
        """CBA coherence C; (C, passed, reason) where a drop beyond tolerance fails."""
        c = rules.cba_coherence(epistemic, action, value)
        previous, self._last_coherence = self._last_coherence, c
        if previous is None:
            return c, True, ""
        passed, reason = self.coherence.check(
            rules.coherence_dropped(previous, c, self.settings.coherence_tolerance),
            action={"epistemic": epistemic, "action": action, "value": value, "C": c}, events=events)
        return c, passed, reason

    # -- writing the audit -----------------------------------------------------------
    def take_events(self) -> list[SafetyEvent]:
        events, self.pending = self.pending, []
        return events

    async def write_events(self, conn: asyncpg.Connection | asyncpg.Pool) -> int:
        """Write pending events in one statement; return how many."""
        events = self.take_events()
        if events:
            await insert_safety_events(conn, events)
        return len(events)


async def insert_safety_events(conn: asyncpg.Connection | asyncpg.Pool,
                               events: list[SafetyEvent]) -> None:
    await conn.execute(
        """INSERT INTO safety_events (ceiling, phase, memory_id, action, reason, enforced)
           SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::jsonb[], $5::text[], $6::bool[])""",
        [e.ceiling for e in events], [e.phase for e in events], [e.memory_id for e in events],
        [json.dumps(e.action, default=str) for e in events], [e.reason for e in events],
        [e.enforced for e in events],
    )

