"""why_do_i_believe (plan §4.2): walk supersedes links back to the original experiences.

A memory the deep pass derived from a DMN association or identity signal (plan §4.7;
src/consolidation/deep/dmn_inputs.py) also names that item: the idle thought it came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from src.consolidation.deep import supersedes_repository
from src.dmn import repository as dmn_repository
from src.terminal import escape
from src.text import clean_text, excerpt

PREVIEW_CHARS = 160


@dataclass(frozen=True)
class DmnOrigin:
    """The DMN item a derived memory came from."""

    item_id: int
    channel: str                 # creative | identity
    at: datetime
    text: str

    @property
    def kind(self) -> str:
        return "creative association" if self.channel == "creative" else f"{self.channel} signal"


@dataclass(frozen=True)
class ChainLink:
    """One memory in the chain; depth 0 is the belief asked about."""

    memory_id: int
    parent_id: int | None
    via: str | None
    depth: int
    memory_type: str
    content: str
    created_at: datetime
    alpha: float
    beta: float
    dmn: DmnOrigin | None = None

    @property
    def center(self) -> float:
        return self.alpha / (self.alpha + self.beta)


async def why_do_i_believe(db: asyncpg.Pool | asyncpg.Connection, memory_id: int) -> list[ChainLink]:
    """The memory and, depth-first, everything it was consolidated from. [] if it does not exist."""
    rows = await supersedes_repository.supersedes_chain(db, memory_id)
    origins = await dmn_repository.origins(db, [r["id"] for r in rows]) if rows else {}
    return [ChainLink(r["id"], r["parent"], r["via"], r["depth"], r["memory_type"], r["content"],
                      r["created_at"], r["alpha"], r["beta"], _origin(origins.get(r["id"]))) for r in rows]


def _origin(row) -> DmnOrigin | None:
    return None if row is None else DmnOrigin(row["id"], row["channel"], row["at"], row["text"])


def _safe(text: str) -> str:
    """One line, control characters escaped (operator-facing)."""
    return escape(excerpt(clean_text(text).text, PREVIEW_CHARS))


def format_chain(memory_id: int, chain: list[ChainLink]) -> str:
    """The chain as indented lines with dates and weights."""
    if not chain:
        return f"no memory #{memory_id}"
    lines = []
    for link in chain:
        how = f" <- {link.via}" if link.via else ""
        lines.append(f"{'  ' * link.depth}#{link.memory_id} [{link.memory_type}{how}] "
                     f"{link.created_at:%Y-%m-%d %H:%M} center {link.center:.2f} "
                     f"(Beta {link.alpha:.2f}, {link.beta:.2f}) {_safe(link.content)}")
        if link.dmn is not None:
            lines.append(f"{'  ' * (link.depth + 1)}from DMN {link.dmn.kind} #{link.dmn.item_id} "
                         f"({link.dmn.at:%Y-%m-%d %H:%M}): {_safe(link.dmn.text)}")
    if len(chain) == 1:
        lines.append("  (an original experience: nothing was consolidated into it)")
    return "\n".join(lines)
