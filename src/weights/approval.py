"""The guardian's approval line at the weight choke point (plan §4.3: "Operator approval
required for center > 0.85 at trust_level < 3").

Promotion asks for that approval itself: a step that would lift a center past the line
waits in `approvals` until the guardian answers (src/consolidation/evolution/promotion.py),
and its changes say so (`WeightChange.approval_checked`). Every other change that raises
a center — retrieval's reinforcement (src/recall/mutation.py), the exit gate's
(src/gates/record.py) — is capped by src/weights/apply.py with `approved_gain` while trust
is below autonomous: it lifts a center to just below the line and no further, and a
center already above it (a promotion the guardian approved) is not raised by it. Above
autonomous trust the line is open and changes apply in full.

Capped, not queued: a queued approval per retrieval would put a write and a question to
the guardian on the hot path for evidence that promotion already turns into a request
when it matters; the cap keeps the batch set-based and still gives the memory all of the
evidence up to the line. The capped change is audited in `consolidation_log` like any
other, its requested amount beside the applied gain and its evidence naming the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

#: How far below the line a capped change stops: at the line itself, floating-point error
#: in alpha / (alpha + beta) could leave the center a hair above it.
APPROVAL_MARGIN = 1e-6


class ApprovalSettings(Protocol):
    """The promotion settings that hold the line (`consolidation.evolution.promotion`)."""

    approval_center: float
    trust_level: int
    trust_level_autonomous: int


@dataclass(frozen=True)
class ApprovalLine:
    """Centers above `center` need the guardian's approval while `trust_level` is below
    `trust_level_autonomous`."""

    center: float = 0.85
    trust_level: int = 0
    trust_level_autonomous: int = 3

    @classmethod
    def of(cls, settings: ApprovalSettings) -> ApprovalLine:
        return cls(settings.approval_center, settings.trust_level, settings.trust_level_autonomous)

    @property
    def holds(self) -> bool:
        """The line is guarded: trust is below autonomous."""
        return self.trust_level < self.trust_level_autonomous

    def evidence(self, requested_gain: float) -> dict:
        """What a capped change's audit row says about the line."""
        return {"approval_line": {"center": self.center, "trust_level": self.trust_level,
                                  "requested_gain": round(requested_gain, 9)}}


def approved_gain(alpha: float, beta: float, gain: float, line: ApprovalLine) -> float:
    """The part of `gain` (alpha evidence) a change without the guardian's approval may add
    to Beta(alpha, beta): all of it when the center stays at or below the line, or when the
    line is open; else up to just below the line, and nothing when the center already
    stands above it."""
    if not line.holds or (alpha + gain) / (alpha + gain + beta) <= line.center:
        return gain
    limit = line.center - APPROVAL_MARGIN
    return max(0.0, min(gain, limit * beta / (1.0 - limit) - alpha))
