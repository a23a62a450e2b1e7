"""A memory's weight history (plan §4.5: "the weights' history stays queryable").

Read from `consolidation_log`, the audit the weight choke point (apply.py) writes for
every change: before, after, who and why. `python -m src.consolidation history ID` prints it.
"""

from __future__ import annotations

import asyncpg

from src.db.sql import Executor


async def weight_history(db: Executor, memory_id: int, limit: int = 50) -> list[asyncpg.Record]:
    """A memory's weight changes, newest first, for introspection (plan §4.5)."""
    return await db.fetch(
        """SELECT at, operation, actor, reason, applied_delta, alpha_after, beta_after, evidence
             FROM consolidation_log WHERE memory_id = $1 ORDER BY at DESC, id DESC LIMIT $2""",
        memory_id, limit)


async def weight_history_text(pool: asyncpg.Pool, memory_id: int, limit: int = 50) -> str:
    """A memory's weight history for introspection (plan §4.5): newest first, one line each."""
    rows = await weight_history(pool, memory_id, limit)
    if not rows:
        return f"memory {memory_id} has no recorded weight changes"
    lines = [f"weight history of memory {memory_id} (newest first):"]
    for r in rows:
        center = r["alpha_after"] / (r["alpha_after"] + r["beta_after"])
        reason = "".join(c if c.isprintable() else repr(c)[1:-1] for c in (r["reason"] or ""))[:120]
        lines.append(f"  {r['at']:%Y-%m-%d %H:%M} {r['actor']:<16} {r['operation']:<10} {r['applied_delta']:+.3f} "
                     f"-> Beta({r['alpha_after']:.2f}, {r['beta_after']:.2f}) center {center:.3f}  {reason}")
    return "\n".join(lines)
