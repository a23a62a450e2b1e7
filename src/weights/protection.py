"""Protection from forgetting: the guardian's /protect ID and /unprotect ID.

A protected memory skips decay, demotion and near-miss suppression at the weight
choke point (src/weights/apply.py logs each skip); evidence still moves it.
Immutable memories are left as they are: their weight never changes anyway, so
marking them would only suggest a difference that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass

from src.db.sql import Executor

_SET = """
WITH target AS (
    SELECT id, immutable, protected FROM memories WHERE id = $1 FOR UPDATE
), changed AS (
    UPDATE memories m SET protected = $2
      FROM target t WHERE m.id = t.id AND NOT t.immutable AND t.protected IS DISTINCT FROM $2
    RETURNING m.id
)
SELECT t.immutable, t.protected AS before, EXISTS (SELECT 1 FROM changed) AS changed FROM target t
"""


@dataclass(frozen=True)
class ProtectionChange:
    memory_id: int
    found: bool
    immutable: bool = False
    before: bool = False
    changed: bool = False


async def set_protected(db: Executor, memory_id: int, protected: bool) -> ProtectionChange:
    """Mark (or unmark) one memory protected; immutable memories are not touched."""
    row = await db.fetchrow(_SET, memory_id, protected)
    if row is None:
        return ProtectionChange(memory_id, False)
    return ProtectionChange(memory_id, True, row["immutable"], row["before"], row["changed"])


async def count_protected(db: Executor) -> int:
    return await db.fetchval("SELECT count(*) FROM memories WHERE protected")


def _parse_id(args: str) -> int | None:
    text = args.strip().lstrip("#")
    return int(text) if text.isdigit() and int(text) < 2**63 else None


async def protect_command(db: Executor, args: str, protected: bool) -> str:
    """The reply to `/protect ID` (protected=True) or `/unprotect ID`."""
    verb = "protect" if protected else "unprotect"
    memory_id = _parse_id(args)
    if memory_id is None:
        return f"usage: /{verb} ID  (a memory id, as /memory shows it: #12)"
    change = await set_protected(db, memory_id, protected)
    if not change.found:
        return f"no memory #{memory_id}; /memory <words> shows ids"
    if change.immutable:
        return f"memory #{memory_id} is immutable: its weight never changes; nothing to {verb}"
    if not change.changed:
        return f"memory #{memory_id} was already {'protected' if protected else 'unprotected'}"
    if protected:
        return (f"memory #{memory_id} is protected: decay, demotion and near-miss suppression skip it "
                "(/unprotect to undo)")
    return f"memory #{memory_id} is no longer protected: it can fade like any other"
