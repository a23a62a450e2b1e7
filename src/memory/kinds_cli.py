"""`python -m src.memory kind [ID value|goal|none]`: mark a memory one of the mind's values or
goals, or neither; alone, list them (src/weights/self_kinds.py, as /value, /goal and /kind at
the prompt). Safe while the service runs: one transaction, through the weight choke point."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from src.memory.session import Session
from src.weights import self_kinds
from src.weights.approval import ApprovalLine
from src.weights.safety import Safety


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `kind` on an argparse subparsers object."""
    p = sub.add_parser("kind", help="mark a memory a value or a goal (or neither); alone, list them",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("memory_id", nargs="?", type=int, help="the memory to mark")
    p.add_argument("kind", nargs="?", choices=(*self_kinds.SELF_KINDS, "none"), help="value, goal or none")
    p.set_defaults(run=run)


async def run(args: argparse.Namespace, s: Session) -> int:
    """List (no arguments) or mark; exit 1 when the memory is missing or cannot be marked."""
    if args.memory_id is None:
        s.out.write(await self_kinds.listing(s.pool) + "\n")
        return 0
    if args.kind is None:
        s.err.write("kind: say what the memory is: value, goal or none\n")
        return 2
    kind = None if args.kind == "none" else args.kind
    promotion = s.settings.consolidation.evolution.promotion
    safety = Safety(s.settings.weights.safety, approval=ApprovalLine.of(promotion))
    center = {"value": promotion.identity_target, "goal": promotion.goal_target}.get(args.kind)
    async with s.pool.acquire() as conn:
        change = await self_kinds.set_self_kind(conn, args.memory_id, kind, by="guardian",
                                                now=datetime.now(UTC), safety=safety, center=center)
    line = self_kinds.describe(change)
    (s.out if change.found and not change.refused else s.err).write(line + "\n")
    return 0 if change.found and not change.refused else 1
