"""The audit row of one forget (issue 39 item 3): when, who, how many rows per table — no text.

Each forget writes one `forget_receipts` row (sql/156) in its own transaction and prints
it; a dry run prints the same counts, from the same statements run and rolled back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

from src.db.sql import Executor

WHO = ("guardian command", "cli", "conversation", "correction", "api")


@dataclass
class Receipt:
    who: str
    at: datetime
    memories: int = 0                      # memories removed, derivations included
    rewritten: int = 0                     # merges written again without the forgotten
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    id: int | None = None                  # forget_receipts.id once written
    dry_run: bool = False

    def add(self, table: str, what: str, n: int) -> None:
        if n:
            self.counts.setdefault(table, {})[what] = self.counts.get(table, {}).get(what, 0) + n

    def text(self) -> str:
        """One paragraph: what was removed and scrubbed, by table; the receipt's number."""
        head = ("dry run, nothing was changed: would forget" if self.dry_run else "forgot")
        derived = f", {self.rewritten} merged memor{'y' if self.rewritten == 1 else 'ies'} written again without it"
        lines = [f"{head} {self.memories} memor{'y' if self.memories == 1 else 'ies'}"
                 + (derived if self.rewritten else "")]
        for what, verb in (("deleted", "rows removed"), ("scrubbed", "texts replaced by [forgotten: N words]")):
            parts = [f"{t} {c[what]}" for t, c in sorted(self.counts.items()) if c.get(what)]
            if parts:
                lines.append(f"  {verb}: {', '.join(parts)}")
        if self.id is not None:
            lines.append(f"  receipt #{self.id} ({self.who}, {self.at:%Y-%m-%d %H:%M:%S} UTC)")
        elif not self.dry_run:
            lines.append(f"  ({self.who})")
        return "\n".join(lines)


async def write(db: Executor, receipt: Receipt) -> int:
    """Insert the receipt; its id."""
    receipt.id = await db.fetchval(
        "INSERT INTO forget_receipts (at, who, memories, counts) VALUES ($1, $2, $3, $4::jsonb) RETURNING id",
        receipt.at, receipt.who, receipt.memories, json.dumps(receipt.counts, sort_keys=True))
    return receipt.id


async def newest(db: Executor) -> int:
    """The newest receipt's id (0 before any): a running mind compares it each cycle."""
    return await db.fetchval("SELECT COALESCE(max(id), 0) FROM forget_receipts")
