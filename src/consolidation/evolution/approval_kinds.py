"""The kinds of approval and what applies them: the registry the queue dispatches on.

Kept apart from the queue (src/consolidation/evolution/approvals.py) so that a feature that
registers its kind (promotion, plan §4.3) imports only this small module, and the
queue can import the features without an import cycle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from src.consolidation.evolution.settings import EvolutionSettings
from src.weights.safety import Safety


@dataclass(frozen=True)
class ApprovalContext:
    """What an apply function may use."""

    pool: asyncpg.Pool
    safety: Safety
    settings: EvolutionSettings
    now: datetime


@dataclass(frozen=True)
class Applied:
    """An apply function's answer: `ok` False = the approval could not take effect."""

    ok: bool
    message: str


ApplyFunction = Callable[[ApprovalContext, Mapping[str, Any]], Awaitable[Applied]]
REGISTRY: dict[str, ApplyFunction] = {}


def register(kind: str, apply: ApplyFunction) -> None:
    """Make `kind` approvable: `apply(ctx, payload)` runs when the operator approves."""
    REGISTRY[kind] = apply


RejectHook = Callable[[asyncpg.Connection, int, Mapping[str, Any], datetime], Awaitable[None]]
REJECT_HOOKS: dict[str, RejectHook] = {}


def on_reject(kind: str, hook: RejectHook) -> None:
    """Run `hook` (in the deciding transaction) when an approval of `kind` is rejected."""
    REJECT_HOOKS[kind] = hook
