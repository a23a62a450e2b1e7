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
from src.db.sql import Executor
from src.weights.safety import Safety


@dataclass(frozen=True)
class ApprovalContext:
    """What an apply function may use.

    `conn` is the connection that holds the approval's row lock, inside the transaction
    that marks it decided (set by the queue, src/consolidation/evolution/approvals.py).
    An apply function writes through `db` (that connection when set): the change and the
    decision commit together or not at all, so a crash between them leaves the approval
    pending with nothing applied, and approving it again applies it once (issue 24).
    """

    pool: asyncpg.Pool
    safety: Safety
    settings: EvolutionSettings
    now: datetime
    conn: asyncpg.Connection | None = None

    @property
    def db(self) -> Executor:
        """Where an apply function reads and writes: the deciding transaction, else the pool."""
        return self.conn if self.conn is not None else self.pool


@dataclass(frozen=True)
class Applied:
    """An apply function's answer: `ok` False = the approval could not take effect."""

    ok: bool
    message: str


ApplyFunction = Callable[[ApprovalContext, Mapping[str, Any]], Awaitable[Applied]]
REGISTRY: dict[str, ApplyFunction] = {}


def register(kind: str, apply: ApplyFunction) -> None:
    """Make `kind` approvable: `apply(ctx, payload)` runs when the operator approves, and
    writes through `ctx.db` (the transaction that marks the approval decided)."""
    REGISTRY[kind] = apply


RejectHook = Callable[[asyncpg.Connection, int, Mapping[str, Any], datetime], Awaitable[None]]
REJECT_HOOKS: dict[str, RejectHook] = {}


def on_reject(kind: str, hook: RejectHook) -> None:
    """Run `hook` (in the deciding transaction) when an approval of `kind` is rejected."""
    REJECT_HOOKS[kind] = hook
