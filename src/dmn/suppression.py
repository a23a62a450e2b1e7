"""DMN activity suppression (plan §4.7): active when idle, quiet during conversation. Pure.

The DMN is anticorrelated with task activity: for `quiet_after_user_s` after the last
user message it produces nothing; then the chance that a tick produces anything rises
as 1 − exp(−(idle − quiet) / idle_tau_s). Whatever it produces still competes in
attention at low urgency, so a user message that arrives meanwhile wins (queued
delivery: a DMN item never interrupts).
"""

from __future__ import annotations

import math
from datetime import datetime


def activity(now: datetime, last_user_at: datetime | None, *, quiet_after_user_s: float,
             idle_tau_s: float) -> float:
    """Probability in [0, 1] that a DMN tick produces output now."""
    if last_user_at is None:
        return 1.0
    idle = (now - last_user_at).total_seconds() - quiet_after_user_s
    if idle <= 0:
        return 0.0
    return 1.0 - math.exp(-idle / idle_tau_s)
