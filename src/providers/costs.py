"""Energy cost ledger (plan §4.8): one `llm_calls` row per call to a paid API, failed ones too.

Cost = tokens_in * input price + tokens_out * output price, prices in USD per million
tokens from `providers.prices` (runtime.yaml); a model without a price costs 0 (logged
once). Writing a row never raises: when the database refuses, the row waits in a bounded
in-memory queue (oldest dropped first) and goes out with the next successful write.

Totals for this session, the last 24 hours and the lifetime, by model and purpose, come
from one query with FILTER clauses; rows still queued in memory are added in.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Literal, NamedTuple, Protocol

import asyncpg

from src.errors import CallCancelled, ProviderError, ProviderTimeout
from src.providers.http_errors import short
from src.providers.settings import ModelPrice

log = logging.getLogger(__name__)

MTOK = Decimal(1_000_000)
CallStatus = Literal["ok", "failed", "timeout", "cancelled"]
QUANTUM = Decimal("0.00000001")  # numeric(14, 8)
Now = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


def status_of(err: ProviderError) -> CallStatus:
    """The ledger status of a failed attempt: `timeout` (no answer in time), `cancelled`
    (the mind ended it: a user's turn, shutdown, the cycle deadline), else `failed`."""
    if isinstance(err, CallCancelled):
        return "cancelled"
    return "timeout" if isinstance(err, ProviderTimeout) else "failed"


@dataclass(frozen=True)
class CallRecord:
    """One call to an outside model, as stored in llm_calls."""

    at: datetime
    session_id: str | None
    provider: str
    model: str
    purpose: str
    tokens_in: int
    tokens_out: int
    cost_usd: Decimal
    latency_ms: float | None
    ok: bool
    error: str | None
    # whose work it was: internal work's name (dmn, gut, consolidation), None for the user's
    # turns (src/providers/budget.py); the background budget counts these rows
    caller: str | None = None
    # ok | failed | timeout | cancelled (sql/110): a timed-out or cancelled attempt keeps its row too
    status: CallStatus = "ok"


class CallUsage(NamedTuple):
    """The usage numbers of one call: tokens sent and received, and how long it took."""

    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: float | None = None


#: The usage of a call that reports none: no tokens counted, no latency measured.
NO_USAGE = CallUsage()


class Ledger(Protocol):
    """Where providers report their calls."""

    async def record(self, *, provider: str, model: str, purpose: str, ok: bool,
                     usage: CallUsage = NO_USAGE, error: str | None = None,
                     status: CallStatus | None = None, caller: str | None = None) -> CallRecord: ...


class Pricing:
    """USD cost of a call from the price table (per million tokens)."""

    def __init__(self, prices: Mapping[str, ModelPrice]):
        self._prices = dict(prices)
        self._warned: set[str] = set()

    def cost(self, model: str, tokens_in: int, tokens_out: int) -> Decimal:
        price = self._prices.get(model)
        if price is None:
            if model not in self._warned:
                self._warned.add(model)
                log.info("no price for model %s in providers.prices; its calls are recorded at $0", model)
            return Decimal(0)
        total = (Decimal(tokens_in) * Decimal(str(price.input_per_mtok))
                 + Decimal(tokens_out) * Decimal(str(price.output_per_mtok))) / MTOK
        return total.quantize(QUANTUM)


class MemoryLedger:
    """Keeps the latest records in memory: for tests, benchmarks and runs without a database."""

    def __init__(self, prices: Mapping[str, ModelPrice] | None = None, *, session_id: str | None = None,
                 now: Now = _utcnow, keep: int = 10_000):
        self.pricing = Pricing(prices or {})
        self.session_id = session_id
        self.records: deque[CallRecord] = deque(maxlen=keep)
        self.clock = now            # when a call is stamped
        self.observers: list[Callable[[CallRecord], None]] = []   # told of every call (the budget)

    async def record(self, *, provider: str, model: str, purpose: str, ok: bool,
                     usage: CallUsage = NO_USAGE, error: str | None = None,
                     status: CallStatus | None = None, caller: str | None = None) -> CallRecord:
        rec = _make_record(self, (provider, model, purpose), CallOutcome(ok, error, status), usage, caller)
        self.records.append(rec)
        _tell(self.observers, rec)
        return rec


def _tell(observers: list[Callable[[CallRecord], None]], rec: CallRecord) -> None:
    """Hand `rec` to each observer; one that fails is logged, never the caller's problem."""
    for observe in observers:
        try:
            observe(rec)
        except Exception:  # noqa: BLE001 - the ledger must never crash its caller
            log.exception("a llm_calls observer failed")


class CallOutcome(NamedTuple):
    """How one call ended: ok or not, the error's text, and its status (default: by `ok`)."""

    ok: bool
    error: str | None = None
    status: CallStatus | None = None


def _make_record(ledger: MemoryLedger | CostLedger, call: tuple[str, str, str], outcome: CallOutcome,
                 usage: CallUsage, caller: str | None) -> CallRecord:
    """The row of one reported call (`call`: provider, model, purpose), stamped with the
    ledger's clock and session, priced, and charged to `caller` (internal work the
    background budget counts; None: nobody's)."""
    provider, model, purpose = call
    tokens_in, tokens_out = max(0, int(usage.tokens_in)), max(0, int(usage.tokens_out))
    return CallRecord(at=ledger.clock(), session_id=ledger.session_id, provider=provider, model=model,
                      purpose=purpose, tokens_in=tokens_in, tokens_out=tokens_out,
                      cost_usd=ledger.pricing.cost(model, tokens_in, tokens_out),
                      latency_ms=usage.latency_ms, ok=outcome.ok,
                      error=short(outcome.error) if outcome.error else None,
                      caller=caller, status=outcome.status or ("ok" if outcome.ok else "failed"))


@dataclass
class Bucket:
    """Calls and spend in one time window."""

    calls: int = 0
    failed: int = 0
    cancelled: int = 0           # ended by the mind (a user's turn, shutdown, a deadline), not failed
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: Decimal = Decimal(0)

    def add(self, rec: CallRecord) -> None:
        self.calls += 1
        cancelled = rec.status == "cancelled"
        self.cancelled += 1 if cancelled else 0
        self.failed += 0 if rec.ok or cancelled else 1
        self.tokens_in += rec.tokens_in
        self.tokens_out += rec.tokens_out
        self.cost_usd += rec.cost_usd


@dataclass
class CostRow:
    model: str
    purpose: str
    session: Bucket = field(default_factory=Bucket)
    day: Bucket = field(default_factory=Bucket)
    lifetime: Bucket = field(default_factory=Bucket)


@dataclass
class CostTotals:
    """Spend by (model, purpose) for the session, the last 24 h and the lifetime."""

    rows: list[CostRow]
    pending: int = 0  # rows not yet in the database (already counted in `rows`)
    database_error: str | None = None  # set when the totals query failed: rows are the queue only

    def _sum(self, window: str) -> Decimal:
        return sum((getattr(r, window).cost_usd for r in self.rows), Decimal(0))

    @property
    def session_cost(self) -> Decimal:
        return self._sum("session")

    @property
    def day_cost(self) -> Decimal:
        return self._sum("day")

    @property
    def lifetime_cost(self) -> Decimal:
        return self._sum("lifetime")


_INSERT = """
INSERT INTO llm_calls (at, session_id, provider, model, purpose, tokens_in, tokens_out,
                       cost_usd, latency_ms, ok, error, caller, status)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
"""

# Session and 24 h from the ledger's own rows (its session and `at` indexes: bounded by the
# session and the day); lifetime from llm_calls_daily (sql/140), the per-day totals kept at
# insert, which retention never trims: no statement here reads the whole ledger.
_TOTALS = """
WITH s AS (
    SELECT model, purpose, count(*) AS calls,
           count(*) FILTER (WHERE NOT ok AND status IS DISTINCT FROM 'cancelled') AS failed,
           count(*) FILTER (WHERE status = 'cancelled') AS cancelled, sum(tokens_in) AS tin, sum(tokens_out) AS tout, sum(cost_usd) AS cost
      FROM llm_calls WHERE session_id = $1 GROUP BY model, purpose
), d AS (
    SELECT model, purpose, count(*) AS calls,
           count(*) FILTER (WHERE NOT ok AND status IS DISTINCT FROM 'cancelled') AS failed,
           count(*) FILTER (WHERE status = 'cancelled') AS cancelled, sum(tokens_in) AS tin, sum(tokens_out) AS tout, sum(cost_usd) AS cost
      FROM llm_calls WHERE at >= $2 GROUP BY model, purpose
), l AS (
    SELECT model, purpose, sum(calls)::bigint AS calls, sum(failed)::bigint AS failed,
           sum(cancelled)::bigint AS cancelled, sum(tokens_in)::bigint AS tin, sum(tokens_out)::bigint AS tout, sum(cost_usd) AS cost
      FROM llm_calls_daily GROUP BY model, purpose
)
SELECT model, purpose,
       COALESCE(s.calls, 0) AS s_calls, COALESCE(s.failed, 0) AS s_failed, COALESCE(s.cancelled, 0) AS s_cancelled, COALESCE(s.tin, 0) AS s_in,
       COALESCE(s.tout, 0) AS s_out, COALESCE(s.cost, 0) AS s_cost,
       COALESCE(d.calls, 0) AS d_calls, COALESCE(d.failed, 0) AS d_failed, COALESCE(d.cancelled, 0) AS d_cancelled, COALESCE(d.tin, 0) AS d_in,
       COALESCE(d.tout, 0) AS d_out, COALESCE(d.cost, 0) AS d_cost,
       COALESCE(l.calls, 0) AS l_calls, COALESCE(l.failed, 0) AS l_failed, COALESCE(l.cancelled, 0) AS l_cancelled, COALESCE(l.tin, 0) AS l_in,
       COALESCE(l.tout, 0) AS l_out, COALESCE(l.cost, 0) AS l_cost
  FROM l FULL JOIN d USING (model, purpose) FULL JOIN s USING (model, purpose)
 ORDER BY model, purpose
"""


def _bucket(row: asyncpg.Record, p: str) -> Bucket:
    return Bucket(calls=row[f"{p}_calls"], failed=row[f"{p}_failed"], cancelled=row[f"{p}_cancelled"],
                  tokens_in=int(row[f"{p}_in"]),
                  tokens_out=int(row[f"{p}_out"]), cost_usd=Decimal(row[f"{p}_cost"]))


class CostLedger:
    """The llm_calls ledger over an asyncpg pool."""

    def __init__(self, pool: asyncpg.Pool, *, session_id: str | None,
                 prices: Mapping[str, ModelPrice], max_pending: int = 1000, write_timeout_s: float = 5.0,
                 now: Now = _utcnow):
        self.pool = pool
        self.write_timeout_s = write_timeout_s
        self.session_id = session_id
        self.pricing = Pricing(prices)
        self.clock = now            # when a call is stamped
        self._pending: deque[CallRecord] = deque()
        self._max_pending = max_pending
        self._dropped = 0
        self._lock = asyncio.Lock()
        self.observers: list[Callable[[CallRecord], None]] = []   # told of every call (the budget)

    @property
    def pending(self) -> int:
        """Rows waiting in memory for the database to accept them."""
        return len(self._pending)

    async def record(self, *, provider: str, model: str, purpose: str, ok: bool,
                     usage: CallUsage = NO_USAGE, error: str | None = None,
                     status: CallStatus | None = None, caller: str | None = None) -> CallRecord:
        """Store one call. Never raises for a database failure (the row is queued instead)."""
        rec = _make_record(self, (provider, model, purpose), CallOutcome(ok, error, status), usage, caller)
        if len(self._pending) >= self._max_pending:
            self._pending.popleft()
            self._dropped += 1
            log.warning("llm_calls queue full (%d rows): dropped the oldest row (%d dropped so far)",
                        self._max_pending, self._dropped)
        self._pending.append(rec)
        _tell(self.observers, rec)
        await self.flush()
        return rec

    async def flush(self) -> int:
        """Write every queued row in one transaction; return how many went out (0 on failure)."""
        async with self._lock:
            batch = list(self._pending)
            if not batch:
                return 0
            try:
                # Bounded waits: a stuck database must not hold up the provider call behind it.
                async with self.pool.acquire(timeout=self.write_timeout_s) as conn, conn.transaction():
                    await conn.executemany(_INSERT, [_params(r) for r in batch],
                                           timeout=self.write_timeout_s)
            except Exception as exc:  # noqa: BLE001 - the ledger must never crash its caller
                log.warning("could not write %d llm_calls row(s) (%s: %s); keeping them in memory",
                            len(batch), type(exc).__name__, short(exc))
                return 0
            written = {id(r) for r in batch}
            self._pending = deque(r for r in self._pending if id(r) not in written)
            if len(batch) > 1:
                log.info("wrote %d queued llm_calls rows", len(batch))
            return len(batch)

    async def totals(self) -> CostTotals:
        """Session / 24 h / lifetime spend by model and purpose (queued rows included)."""
        now = self.clock()
        since = now - timedelta(hours=24)
        rows: dict[tuple[str, str], CostRow] = {}
        problem = None
        try:
            for r in await self.pool.fetch(_TOTALS, self.session_id, since):
                rows[(r["model"], r["purpose"])] = CostRow(r["model"], r["purpose"], _bucket(r, "s"),
                                                           _bucket(r, "d"), _bucket(r, "l"))
        except Exception as exc:  # noqa: BLE001 - the summary line must not break a cycle
            problem = f"{type(exc).__name__}: {short(exc)}"
            log.warning("could not read llm_calls totals (%s)", problem)
        for rec in self._pending:
            row = rows.setdefault((rec.model, rec.purpose), CostRow(rec.model, rec.purpose))
            row.lifetime.add(rec)
            if rec.at >= since:
                row.day.add(rec)
            if rec.session_id == self.session_id:
                row.session.add(rec)
        return CostTotals(rows=[rows[k] for k in sorted(rows)], pending=len(self._pending),
                          database_error=problem)

    async def summary_line(self) -> str:
        """'Session cost: $X.XX | 24h: $X.XX' for the system prompt; never raises for the database."""
        return cost_summary_line(await self.totals())


def _params(r: CallRecord) -> tuple:
    return (r.at, r.session_id, r.provider, r.model, r.purpose, r.tokens_in, r.tokens_out,
            r.cost_usd, r.latency_ms, r.ok, r.error, r.caller, r.status)


def cost_summary_line(totals: CostTotals) -> str:
    """The one line the plan injects into the system prompt."""
    return f"Session cost: ${totals.session_cost:.2f} | 24h: ${totals.day_cost:.2f}"


def _money(value: Decimal) -> str:
    return f"${value:.4f}"


def format_cost_table(totals: CostTotals) -> str:
    """The `/cost` answer: calls and spend per model and purpose in three windows."""
    note = (f"(database unavailable: {totals.database_error}; showing only calls not yet written)"
            if totals.database_error else "")
    if not totals.rows:
        return note or "No language-model calls recorded yet."
    windows = (("session", "session"), ("day", "last 24 h"), ("lifetime", "lifetime"))
    total = CostRow("total", "")
    for row in totals.rows:
        for window, _ in windows:
            dst, src = getattr(total, window), getattr(row, window)
            dst.calls, dst.failed = dst.calls + src.calls, dst.failed + src.failed
            dst.cancelled += src.cancelled
            dst.cost_usd += src.cost_usd
    table = [["model", "purpose"] + ["calls", "cost"] * 3 + ["failed", "cancelled"]]
    for r in [*totals.rows, total]:
        cells = [r.model, r.purpose]
        for window, _ in windows:
            bucket = getattr(r, window)
            cells += [str(bucket.calls), _money(bucket.cost_usd)]
        table.append(cells + [str(r.lifetime.failed), str(r.lifetime.cancelled)])
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    spans = ["".ljust(widths[0]), "".ljust(widths[1])]
    for i, (_, label) in enumerate(windows):
        span = widths[2 + 2 * i] + 2 + widths[3 + 2 * i]
        spans.append(f" {label} ".center(span, "-"))
    lines = ["  ".join(spans).rstrip()]
    for row in table:
        cells = [c.ljust(w) if i < 2 else c.rjust(w)
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
    if note:
        lines.append(note)
    elif totals.pending:
        lines.append(f"({totals.pending} call(s) not yet written to the database; counted above)")
    return "\n".join(lines)
