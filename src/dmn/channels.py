"""The DMN's three output channels and the metacognitive review (plan §4.7). Pure.

    1. memory + goal connection      → a self-prompt to the loop (purposeful)
    2. disparate memory connection   → a creative-association record for consolidation
    3. memory + identity connection  → a signal for identity evaluation

With no goal in reach (a newborn mind has none) channel 1 still speaks: the most
strongly drawn memory becomes a spontaneous self-prompt, so the DMN works from the first
memory on, and offline (the text is built from the memories, no model needed). The
texts that reach the loop are in src/dmn/prompts.py; a self-prompt names who said its memory,
and its detail records the speaker and whether an imported stranger's memory seeded it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from src.dmn.prompts import goal_self_prompt, review_self_prompt, spontaneous_self_prompt
from src.recall.speakers import Speaker
from src.text import excerpt
from src.vectors import closest


@dataclass(frozen=True)
class Sampled:
    id: int
    content: str
    unit: np.ndarray
    at: datetime
    center: float
    speaker: Speaker | None = None     # who said it (src/recall/speakers.py)
    stranger: bool = False             # an imported stranger's (src/dmn/sampling.imported_stranger)

    def seed_detail(self) -> dict:
        """What a self-prompt's detail records of the memory that seeded it."""
        return {"speaker": None if self.speaker is None else self.speaker.label, "imported_stranger": self.stranger}


@dataclass
class DmnOutput:
    channel: str                       # self_prompt | creative | identity | review
    memory_ids: list[int]
    text: str
    detail: dict = field(default_factory=dict)


def _best(vec: np.ndarray, layer: Sequence[tuple[str, np.ndarray]]) -> tuple[str, float] | None:
    found = closest(vec, [v for _, v in layer])
    return None if found is None else (layer[found[0]][0], found[1])


def goal_prompts(samples: Sequence[Sampled], goals: Sequence[tuple[str, np.ndarray]], threshold: float,
                 chars: int) -> list[DmnOutput]:
    """Channel 1: each sampled memory that reaches a goal becomes a self-prompt."""
    out = []
    for s in samples:
        best = _best(s.unit, goals)
        if best is not None and best[1] >= threshold:
            text = goal_self_prompt(s.content, best[0], chars, speaker=s.speaker, imported=s.stranger)
            out.append(DmnOutput("self_prompt", [s.id], text,
                                 {"goal": best[0], "similarity": round(best[1], 4), "purposeful": True,
                                  **s.seed_detail()}))
    return out


def spontaneous_prompt(s: Sampled, now: datetime, chars: int) -> DmnOutput:
    """Channel 1 without a goal in reach: the memory itself, and why it might matter."""
    days = max(0.0, (now - s.at).total_seconds() / 86400.0)
    text = spontaneous_self_prompt(s.content, days, chars, speaker=s.speaker, imported=s.stranger)
    return DmnOutput("self_prompt", [s.id], text, {"purposeful": False, **s.seed_detail()})


def creative_pairs(samples: Sequence[Sampled], low: float, high: float, min_days: float,
                   chars: int) -> list[DmnOutput]:
    """Channel 2: pairs far apart in time whose meanings connect without being the same."""
    out = []
    for i, a in enumerate(samples):
        for b in samples[i + 1:]:
            sim = float(a.unit @ b.unit)
            gap = abs((a.at - b.at).total_seconds()) / 86400.0
            if low <= sim < high and gap >= min_days:
                out.append(DmnOutput("creative", sorted([a.id, b.id]),
                                     f"A connection across {gap:.0f} days: '{excerpt(a.content, chars)}' and "
                                     f"'{excerpt(b.content, chars)}'.",
                                     {"similarity": round(sim, 4), "days_apart": round(gap, 1)}))
    return out


def identity_signals(samples: Sequence[Sampled], values: Sequence[tuple[str, np.ndarray]], threshold: float,
                     chars: int) -> list[DmnOutput]:
    """Channel 3: a sampled memory that touches a value is flagged for identity evaluation."""
    out = []
    for s in samples:
        best = _best(s.unit, values)
        if best is not None and best[1] >= threshold:
            out.append(DmnOutput("identity", [s.id],
                                 f"'{excerpt(s.content, chars)}' touches my value '{excerpt(best[0], chars)}'.",
                                 {"value": best[0], "similarity": round(best[1], 4)}))
    return out


def review_prompt(winner_text: str, candidates: Sequence[dict], chars: int) -> DmnOutput | None:
    """'Last cycle I prioritised X over Y — was that right?' from one thought_log row."""
    losers = [c for c in candidates if not c.get("won")]
    if not losers:
        return None
    loser = max(losers, key=lambda c: c.get("salience", 0.0))
    return DmnOutput("review", [],
                     review_self_prompt(winner_text, loser.get("text", ""), loser.get("source", "?"), chars),
                     {"loser_source": loser.get("source"), "loser_salience": loser.get("salience")})
