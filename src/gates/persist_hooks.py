"""What the rest of the mind adds to the exit gate when it is built (src/mind.py): the gut
and readiness, which live in later layers and are seen here only through these shapes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class Feeling(Protocol):
    """The gut as the exit gate sees it (src/gut/gut.py): a charge for an item, and what was kept."""

    def charge(self, vec: np.ndarray | None) -> float: ...
    def absorb(self, embed_model: str, vectors: np.ndarray) -> None: ...


@dataclass(frozen=True)
class PersistHooks:
    """What the rest of the mind adds to the exit gate: the two-centroid gut (plan §5.1), which
    replaces the v0.1 store-centroid charge and absorbs what is persisted, and
    `on_persisted(memory ids)`, through which readiness sees memory formation."""

    gut: Feeling | None = None
    on_persisted: Callable[[list[int]], Awaitable[None]] | None = None
