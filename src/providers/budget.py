"""The background budget (issue 24): what the mind's own work may spend on models.

Internal work makes model calls nobody asked for: the DMN's and the gut's impulses
("idle thought": the cycles they cause) and consolidation (its deep passes, the light
ticker's contradiction layer, the cycles its announcements cause). Without a limit an
idle mind kept calling models all night (measured: notes.md). Two limits over rolling
windows (`providers.budget:` in runtime.yaml, `BudgetSettings`):

- `hourly_calls` model calls by internal work in the last hour, of which idle thought
  may take `idle_share` (the DMN must not starve consolidation);
- `daily_cost_usd` spent by internal work in the last 24 hours.

When a limit is reached internal work stops spending: the DMN tick produces nothing,
internal impulses are not submitted (`gate`), the scheduled deep pass waits and gets
no more calls than are left, the light ticker's model layer is skipped (`BudgetedModel`
raises `BudgetSpent`). The user's turns never look at the budget.

Whose work a call is, the call says (`caller=`, src/providers/caller.py): the loop's
thinking for its turn's winner, consolidation's model for consolidation (`ChargedModel`).
The ledger writes it into every `llm_calls` row (`caller`, sql/135) and hands the row to
`BackgroundBudget.observe`. Embedding rows carry no caller (an embedding says nothing of
whose it is; at Gemini's embedding price a deep pass's vectors cost a fraction of a cent). The count lives in memory — O(1) per
call and per check — and is seeded at start from the last 24 hours of `llm_calls` by
one statement on a partial index, grouped by minute (at most 1,440 rows per caller).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Protocol

from src.errors import BudgetSpent
from src.providers.caller import BACKGROUND, IDLE_THOUGHT, Caller, background_caller
from src.providers.charged import ChargedModel
from src.providers.settings import BudgetSettings

log = logging.getLogger(__name__)

HOUR = timedelta(hours=1)
DAY = timedelta(hours=24)
#: Embedding rows cost money but are not "calls" in the hourly count (one batch per flush).
EMBED_PREFIX = "embed:"


class Spent(Protocol):
    """What the budget reads of a ledger row (src/providers/costs.py CallRecord)."""

    at: datetime
    purpose: str
    cost_usd: Decimal
    caller: str | None


@dataclass(frozen=True)
class BudgetLeft:
    """The budget at one moment: used and allowed in each window."""

    enabled: bool
    calls_used: int
    calls_limit: int
    idle_used: int
    idle_limit: int
    cost_used: Decimal
    cost_limit: Decimal

    def calls_left(self, caller: str) -> int:
        """Model calls `caller` may still make this hour (0 once the daily cost is reached)."""
        if not self.enabled:
            return 1_000_000
        if self.cost_used >= self.cost_limit:
            return 0
        left = self.calls_limit - self.calls_used
        if caller in IDLE_THOUGHT:
            left = min(left, self.idle_limit - self.idle_used)
        return max(0, left)

    def allows(self, caller: str) -> bool:
        return self.calls_left(caller) > 0

    def spent_reason(self, caller: str) -> str | None:
        """Why `caller` may not spend now, or None."""
        if self.allows(caller):
            return None
        if self.cost_used >= self.cost_limit:
            return f"${self.cost_used:.4f} of ${self.cost_limit:.2f} spent by internal work in 24 h"
        if caller in IDLE_THOUGHT and self.idle_used >= self.idle_limit:
            return f"idle thought made {self.idle_used} of its {self.idle_limit} calls this hour"
        return f"internal work made {self.calls_used} of {self.calls_limit} calls this hour"

    def as_json(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "calls_used": self.calls_used, "calls_limit": self.calls_limit,
                "idle_used": self.idle_used, "idle_limit": self.idle_limit,
                "cost_used_usd": self.cost_used, "cost_limit_usd": self.cost_limit,
                "consolidation_calls_left": self.calls_left("consolidation"),
                "idle_calls_left": self.calls_left("dmn")}

    def line(self) -> str:
        """The /status line."""
        if not self.enabled:
            return "background budget: off (budget.enabled: false)"
        text = (f"background budget: {self.calls_used} of {self.calls_limit} calls this hour "
                f"(idle thought {self.idle_used} of {self.idle_limit}), "
                f"${self.cost_used:.4f} of ${self.cost_limit:.2f} in 24 h")
        if reason := self.spent_reason("consolidation"):
            return f"{text} — spent ({reason}): internal work waits"
        if reason := self.spent_reason("dmn"):
            return f"{text} — idle thought's share spent ({reason}): the DMN and the gut wait"
        return text


@dataclass
class _Entry:
    at: datetime
    idle: bool
    calls: int
    cost: Decimal


class _Window:
    """Entries of one rolling window, oldest first, with running sums."""

    def __init__(self, span: timedelta):
        self.span = span
        self.entries: deque[_Entry] = deque()
        self.calls = self.idle_calls = 0
        self.cost = Decimal(0)

    def add(self, entry: _Entry) -> None:
        self.entries.append(entry)
        self._count(entry, 1)

    def prune(self, now: datetime) -> None:
        # entries arrive in time order (a row out of order by a few ms leaves a little late)
        while self.entries and self.entries[0].at <= now - self.span:
            self._count(self.entries.popleft(), -1)

    def _count(self, e: _Entry, sign: int) -> None:
        self.calls += sign * e.calls
        self.idle_calls += sign * e.calls * e.idle
        self.cost += sign * e.cost


# Per minute and caller over the last 24 hours: a range scan of the partial index on
# llm_calls (at) WHERE caller IS NOT NULL (sql/135), never the whole ledger. A group is
# dated by its newest call: the others of its minute leave the window up to a minute late.
_SEED = """
SELECT max(at) AS at, caller,
       count(*) FILTER (WHERE purpose NOT LIKE 'embed:%') AS calls,
       COALESCE(sum(cost_usd), 0) AS cost
  FROM llm_calls
 WHERE caller IS NOT NULL AND at > $1
 GROUP BY date_trunc('minute', at), caller
 ORDER BY 1, 2
"""


def _utcnow() -> datetime:
    return datetime.now(UTC)


class BackgroundBudget:
    """The running count of internal work's calls and spend (see the module docstring)."""

    def __init__(self, settings: BudgetSettings | None = None, *, now: Callable[[], datetime] = _utcnow):
        self.settings = settings or BudgetSettings()
        self._now = now
        self._hour = _Window(HOUR)
        self._day = _Window(DAY)
        self.refused: dict[str, int] = {}     # impulses and ticks held back, per caller (for /status)
        self._waiting: set[str] = set()      # callers told the budget is spent (said once each)

    async def seed(self, db: Any, now: datetime | None = None) -> int:
        """Start from what internal work spent in the last 24 hours (llm_calls); rows read."""
        now = now or self._now()
        self._hour, self._day = _Window(HOUR), _Window(DAY)
        rows = await db.fetch(_SEED, now - DAY)
        for r in rows:
            entry = _Entry(r["at"], r["caller"] in IDLE_THOUGHT, int(r["calls"]), Decimal(r["cost"]))
            self._day.add(entry)
            if entry.at > now - HOUR:
                self._hour.add(entry)
        return len(rows)

    def observe(self, rec: Spent) -> None:
        """The ledger's hook: count `rec` when internal work made it."""
        caller = getattr(rec, "caller", None)
        if background_caller(caller) is None:
            return
        calls = 0 if rec.purpose.startswith(EMBED_PREFIX) else 1
        entry = _Entry(rec.at, caller in IDLE_THOUGHT, calls, Decimal(rec.cost_usd))
        self._hour.add(entry)
        self._day.add(entry)

    def left(self, now: datetime | None = None) -> BudgetLeft:
        """The budget now."""
        now = now or self._now()
        self._hour.prune(now)
        self._day.prune(now)
        cfg = self.settings
        return BudgetLeft(cfg.enabled, self._hour.calls, cfg.hourly_calls, self._hour.idle_calls,
                          int(cfg.hourly_calls * cfg.idle_share), self._day.cost,
                          Decimal(str(cfg.daily_cost_usd)))

    def status_line(self, now: datetime | None = None) -> str:
        """The /status line: the budget now, and what it held back this session."""
        held = ", ".join(f"{k} {v}" for k, v in sorted(self.refused.items()))
        return self.left(now).line() + (f"; held back this session: {held}" if held else "")

    def calls_left(self, caller: str, now: datetime | None = None) -> int:
        return self.left(now).calls_left(caller)

    def allows(self, caller: str, now: datetime | None = None) -> bool:
        """May `caller` spend now? Says once in the log when internal work starts and stops waiting."""
        left = self.left(now)
        ok = left.allows(caller)
        if not ok:
            self.refused[caller] = self.refused.get(caller, 0) + 1
        if not ok and caller not in self._waiting:
            self._waiting.add(caller)
            log.info("background budget spent (%s); %s waits, the user's turns do not",
                     left.spent_reason(caller), caller)
        elif ok and caller in self._waiting:
            self._waiting.discard(caller)
            log.info("background budget available again for %s: %s", caller, left.line())
        return ok

    def gate(self, submit: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        """`submit` for internal impulses: one from internal work is dropped (None) while its
        budget is spent; anything else passes through."""
        async def gated(source: str, text: str, **kwargs: Any) -> Any:
            caller = background_caller(source)
            if caller is not None and not self.allows(caller, kwargs.get("now")):
                return None
            return await submit(source, text, **kwargs)
        return gated

    def guard(self, model: Any, caller: str) -> BudgetedModel:
        """`model` for `caller`'s own calls: refused with BudgetSpent while the budget is spent."""
        return BudgetedModel(model, self, caller)


class BudgetedModel(ChargedModel):
    """A model whose calls are `caller`'s, asking the budget before each (the light ticker's).

    A spent budget raises `BudgetSpent`, a `ProviderSkipped`: callers degrade as they do
    without a model (the contradiction scan leaves the pair undecided)."""

    def __init__(self, model: Any, budget: BackgroundBudget, caller: str):
        super().__init__(model, Caller("internal", caller))
        self.budget = budget

    def _check(self, purpose: str) -> None:
        name = self.caller.charge or ""
        if not self.budget.allows(name):
            reason = self.budget.left().spent_reason(name)
            raise BudgetSpent(f"background budget spent ({reason}); skipped {purpose}", provider=self.provider)

    async def generate(self, messages: Sequence[Any], *, purpose: str, **kwargs: Any) -> Any:
        self._check(purpose)
        return await super().generate(messages, purpose=purpose, **kwargs)

    async def generate_structured(self, messages: Sequence[Any], schema: Any, *, purpose: str, **kwargs: Any) -> Any:
        self._check(purpose)
        return await super().generate_structured(messages, schema, purpose=purpose, **kwargs)

    async def meta_call(self, question: str, *, purpose: str, **kwargs: Any) -> Any:
        self._check(purpose)
        return await super().meta_call(question, purpose=purpose, **kwargs)

    async def meta_call_structured(self, question: str, schema: Any, *, purpose: str, **kwargs: Any) -> Any:
        self._check(purpose)
        return await super().meta_call_structured(question, schema, purpose=purpose, **kwargs)


__all__ = ["BACKGROUND", "IDLE_THOUGHT", "BackgroundBudget", "BudgetLeft", "BudgetedModel", "background_caller"]
