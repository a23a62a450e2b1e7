"""What every page handler may read: the pool, settings and the mind's live facts."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import asyncpg
import numpy as np

from src.providers.budget import BudgetLeft
from src.recall.retrieval import Retriever
from src.web.settings import WebSettings


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class View:
    """The web view's handle on one mind (running in this process, or stopped)."""

    pool: asyncpg.Pool
    settings: WebSettings
    mode: str                                   # "in-process" or "standalone (mind not running)"
    session_id: str | None = None
    providers_report: list[str] = field(default_factory=list)
    safety_modes: dict[str, str] = field(default_factory=dict)
    retriever: Retriever | None = None
    # Search draws its Dirichlet blend and noise from rng(seed): a seed fixed per query, so a
    # reload shows the same ranking (src/web/search_page.py).
    rng: Callable[[int], np.random.Generator] = np.random.default_rng
    # what "now" is to a page: each page reads it once and dates every memory relative to it
    # ("Wed 25 Nov 2026, 3 days ago", src/recall/dated.py); a test fixes it
    clock: Callable[[], datetime] = _now
    cycles: Callable[[], int] | None = None     # this session's cycles, when the mind runs here
    # what the background budget has left (issue 24): the running mind's count, or one read
    # from llm_calls by the standalone viewer; None: not shown
    budget: Callable[[], Awaitable[BudgetLeft]] | None = None
