"""Circuit breakers per reinforced pattern (plan §3.9 Phase C).

A *pattern* is who reinforces what: the actor of a weight change and the memory it
reinforces (`retrieval`/#12, `promotion`/#40, `dmn`/#7). Every reinforcement is noted
with the ids of the evidence behind it (`evidence_ids`); a consolidation cycle (one run
of the monitors, src/consolidation/monitors.py) then feeds each noted pattern's
`PatternBreaker`. A pattern reinforced `max_cycles` cycles in a row with no evidence it
had not seen before is *tripped*; while tripped, a reinforcement that brings no new
evidence is paused (enforced) or logged as one that would be (shadow); one that brings
new evidence passes and, at the next close, starts the count again.

"In a row" counts the actor's active cycles: a cycle in which the actor reinforced
nothing at all is skipped, while a cycle in which the actor reinforced other memories but
not this one ends the pattern's streak. The actors of `PER_PASS_ACTORS` act inside the
deep pass, so only the deep pass's own cycle closes theirs: a light tick in the middle of
a pass's promotions would otherwise split one pass into two cycles.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from src.weights.safety_rules import PatternBreaker, RuleResult

log = logging.getLogger(__name__)

#: (actor, memory id): who reinforces, and what.
PatternKey = tuple[str, int]
#: Actors whose cycle is the deep pass (src/consolidation/monitors.py closes it after a pass).
PER_PASS_ACTORS = frozenset({"promotion"})
# Evidence keys that say when, not what: the same evidence seen at another time is not new.
_VOLATILE = frozenset({"at"})


def evidence_ids(explicit: Iterable[Hashable], evidence: Mapping[str, Any]) -> frozenset[Hashable]:
    """What a reinforcement rests on: the ids the caller named, else its evidence record
    without its time (retrieval: the query; the exit gate: the scratch item it confirmed)."""
    named = frozenset(explicit)
    if named:
        return named
    stable = {k: v for k, v in evidence.items() if k not in _VOLATILE}
    return frozenset({json.dumps(stable, sort_keys=True, default=str)})


def pattern_name(key: PatternKey) -> str:
    """How a pattern reads in the audit: "retrieval/#12"."""
    return f"{key[0]}/#{key[1]}"


@dataclass(frozen=True)
class Trip:
    """A pattern that is tripped after a cycle closed (its breaker's reason)."""

    key: PatternKey
    reason: str


class PatternBreakers:
    """The breakers of every pattern reinforced in the last active cycle of its actor."""

    def __init__(self, max_cycles: int, max_patterns: int = 10_000):
        self.max_cycles = max_cycles
        self.max_patterns = max_patterns
        self._breakers: dict[PatternKey, PatternBreaker] = {}
        self._cycle: dict[PatternKey, set[Hashable]] = {}     # noted this cycle, with its evidence
        self._reported: set[PatternKey] = set()               # pauses already logged this cycle
        self._full_warned = False

    def tripped(self, key: PatternKey) -> bool:
        breaker = self._breakers.get(key)
        return breaker is not None and breaker.tripped

    def pauses(self, key: PatternKey, evidence: frozenset[Hashable]) -> bool:
        """True when `key` is tripped and `evidence` holds nothing it has not seen."""
        return self.tripped(key) and self._breakers[key].knows(evidence)

    def first_report(self, key: PatternKey) -> bool:
        """True the first time in this cycle a pause of `key` is reported (one event per cycle)."""
        if key in self._reported:
            return False
        self._reported.add(key)
        return True

    def note(self, key: PatternKey, evidence: frozenset[Hashable]) -> None:
        """One reinforcement of `key` (applied or paused) in the current cycle."""
        noted = self._cycle.get(key)
        if noted is None:
            if len(self._cycle) >= self.max_patterns:
                if not self._full_warned:
                    self._full_warned = True
                    log.warning("circuit breaker: %d patterns noted and no cycle closed (monitors off?); "
                                "further patterns are not tracked until one closes", self.max_patterns)
                return
            noted = self._cycle[key] = set()
        noted |= evidence

    def close_cycle(self, *, deep_pass: bool = True) -> list[Trip]:
        """Feed every pattern noted this cycle to its breaker; the tripped ones. Without
        `deep_pass` (a light tick) the patterns of PER_PASS_ACTORS stay open."""
        kept = {k: v for k, v in self._cycle.items() if k[0] in PER_PASS_ACTORS} if not deep_pass else {}
        self._cycle = {k: v for k, v in self._cycle.items() if k not in kept}
        active = {actor for actor, _ in self._cycle}
        for key in [k for k in self._breakers if k[0] in active and k not in self._cycle]:
            del self._breakers[key]          # its actor reinforced other things: the row is broken
        trips = []
        for key, evidence in self._cycle.items():
            breaker = self._breakers.setdefault(key, PatternBreaker(self.max_cycles))
            result: RuleResult = breaker.observe(pattern_name(key), evidence)
            if not result.passed:
                trips.append(Trip(key, result.reason))
        self._cycle, self._reported, self._full_warned = kept, set(), False
        return trips
