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

What Phase C does when a check fails (enforced; in shadow mode the same event is written
with `enforced` false, and its `action.effect` says what would have happened):
    circuit breaker   the tripped pattern's reinforcements without new evidence are
                      refused at the weight choke point (src/weights/patterns.py)
    entropy monitor   sampling is broadened for `broaden_cycles` cycles: Beta draws rest on
                      at most `broaden_evidence` units (`sampling_evidence_cap`)
    CBA coherence     promotion pauses for `promotion_pause_cycles` cycles (`promotion_paused`)
A cycle is one run of the monitors (`close_cycle`), which also counts those pauses down.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import asyncpg

from src.weights import safety_rules as rules
from src.weights.approval import ApprovalLine
from src.weights.patterns import PatternBreakers, pattern_name
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

    def __init__(self, settings: SafetySettings | None = None, *, approval: ApprovalLine | None = None):
        self.settings = settings or SafetySettings()
        # the guardian's approval line (src/weights/approval.py), from the promotion settings;
        # the service always passes it, None leaves the other ceilings to be tested alone
        self.approval = approval
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
        self.patterns = PatternBreakers(s.circuit_breaker_cycles, s.max_tracked_patterns)
        self._last_coherence: float | None = None
        self._broaden_left = 0              # cycles of broadened sampling still to run
        self._promotion_pause_left = 0      # cycles promotion stays paused

    # -- which phases block -------------------------------------------------------
    def phase_modes(self) -> dict[str, str]:
        s = self.settings
        return {"A": s.phase_a, "B": s.phase_b, "C": s.phase_c}

    def status_line(self) -> str:
        """The phases' modes, and what Phase C has switched on right now."""
        modes = self.phase_modes()
        acting = [f"sampling broadened ({self._broaden_left} cycles left)"] if self.sampling_broadened else []
        if self.promotion_paused:
            acting.append(f"promotion paused ({self._promotion_pause_left} cycles left)")
        return "safety: " + ", ".join(f"phase {p} {m}" for p, m in modes.items()) + "".join(f"; {a}" for a in acting)

    # -- what Phase C has switched on ------------------------------------------------
    @property
    def sampling_broadened(self) -> bool:
        """An entropy alarm (enforced) broadened sampling and its cycles have not run out."""
        return self._broaden_left > 0

    def sampling_evidence_cap(self) -> float | None:
        """The most evidence a Beta draw may rest on while sampling is broadened, else None."""
        return self.settings.broaden_evidence if self.sampling_broadened else None

    @property
    def promotion_paused(self) -> bool:
        """A coherence drop (enforced) paused promotion and its cycles have not run out."""
        return self._promotion_pause_left > 0

    # -- Phase C: circuit breaker ----------------------------------------------------
    def check_pattern(self, actor: str, memory_id: int, evidence: frozenset[Hashable], *,
                      events: list[SafetyEvent] | None = None) -> tuple[bool, str]:
        """Note one reinforcement of the pattern (actor, memory); False = paused (enforced).

        The weight choke point calls this for every reinforcement; a loop that reinforces
        by other means (the DMN surfacing a memory tick after tick) may call it too, with
        its own actor name, and skip what is paused. `evidence`: ids of what the
        reinforcement rests on (`patterns.evidence_ids`). A pause is logged once per
        pattern per cycle."""
        group = memory_id
        key = (actor, group)
        self.patterns.note(key, evidence)
        if not self.patterns.pauses(key, evidence):
            return True, ""
        reason = (f"pattern {pattern_name(key)} is tripped (reinforced {self.settings.circuit_breaker_cycles}+ "
                  "cycles in a row with no new evidence) and this reinforcement brings none")
        if not self.patterns.first_report(key):
            return (False, reason) if self.circuit.enabled else (True, "")
        effect = "reinforcement refused" if self.circuit.enabled else "would refuse this reinforcement"
        return self.circuit.check(rules.RuleResult(False, reason), memory_id=group,
                                  action={"actor": actor, "pattern": pattern_name(key), "effect": effect},
                                  events=events)

    def close_cycle(self, *, deep_pass: bool = True, events: list[SafetyEvent] | None = None) -> list[str]:
        """End one consolidation cycle: feed the breakers, log every tripped pattern, count
        the pauses down. The tripped patterns' reasons. A light tick passes `deep_pass`
        False: promotion's patterns wait for the pass (patterns.PER_PASS_ACTORS)."""
        self._broaden_left = max(0, self._broaden_left - 1)
        self._promotion_pause_left = max(0, self._promotion_pause_left - 1)
        trips = self.patterns.close_cycle(deep_pass=deep_pass)
        effect = ("its reinforcements without new evidence are refused" if self.circuit.enabled
                  else "would refuse its reinforcements without new evidence")
        for trip in trips:
            actor, group = trip.key
            self.circuit.check(rules.RuleResult(False, trip.reason), memory_id=group,
                               action={"actor": actor, "pattern": pattern_name(trip.key), "effect": effect},
                               events=events)
        return [t.reason for t in trips]

    # -- Phase C: entropy and coherence (per consolidation cycle) ----------------------
    def observe_entropy(self, entropy_bits: float, *, memories: int,
                        detail: Mapping[str, Any] | None = None,
                        events: list[SafetyEvent] | None = None) -> tuple[bool, str]:
        """Entropy monitor: False = the distribution is collapsing; sampling is broadened."""
        result = self._entropy_monitor.observe(entropy_bits)
        n = self.settings.broaden_cycles
        effect = (f"sampling broadened for {n} cycles" if self.entropy.enabled
                  else f"would broaden sampling for {n} cycles")
        passed, reason = self.entropy.check(
            result, action={"entropy_bits": entropy_bits, "memories": memories, **(detail or {}),
                            "effect": effect}, events=events)
        if not result.passed and self.entropy.enabled:
            self._broaden_left = n
            log.warning("entropy monitor: %s; %s", result.reason, effect)
        return passed, reason

    def observe_coherence(self, epistemic: float, action: float, value: float, *,
                          events: list[SafetyEvent] | None = None) -> tuple[float, bool, str]:
        """CBA coherence C; (C, passed, reason) where a drop beyond tolerance fails and
        pauses promotion (enforced)."""
        c = rules.cba_coherence(epistemic, action, value)
        previous, self._last_coherence = self._last_coherence, c
        if previous is None:
            return c, True, ""
        dropped = rules.coherence_dropped(previous, c, self.settings.coherence_tolerance)
        n = self.settings.promotion_pause_cycles
        effect = (f"promotion paused for {n} cycles" if self.coherence.enabled
                  else f"would pause promotion for {n} cycles")
        passed, reason = self.coherence.check(
            dropped, action={"epistemic": epistemic, "action": action, "value": value, "C": c, "effect": effect},
            events=events)
        if not dropped.passed and self.coherence.enabled:
            self._promotion_pause_left = n
            log.warning("CBA coherence: %s; %s", dropped.reason, effect)
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
    """Write `events` in their order. A memory deleted since its event was noted (a pattern
    closes a cycle later) is written as NULL, as its foreign key would set it."""
    await conn.execute(
        """INSERT INTO safety_events (ceiling, phase, memory_id, action, reason, enforced)
           SELECT e.ceiling, e.phase, m.id, e.action, e.reason, e.enforced
             FROM unnest($1::text[], $2::text[], $3::bigint[], $4::jsonb[], $5::text[], $6::bool[])
                  WITH ORDINALITY AS e(ceiling, phase, memory_id, action, reason, enforced, n)
             LEFT JOIN memories m ON m.id = e.memory_id
            ORDER BY e.n""",
        [e.ceiling for e in events], [e.phase for e in events], [e.memory_id for e in events],
        [json.dumps(e.action, default=str) for e in events], [e.reason for e in events],
        [e.enforced for e in events],
    )

