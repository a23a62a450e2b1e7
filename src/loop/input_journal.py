"""The input journal: every line the operator types is durable before it is read further.

The stdin reader hands each chunk's lines here and waits: they are written in one
multi-row statement (`input_journal`) before the reader takes the next chunk, so a
SIGKILL loses no line the process has read. When the database is away the lines go
to a spill file instead (appended and fsynced, one JSON object a line), the operator
is told once on stdout that input is held, and the spill is moved into the journal
as soon as the database answers again — also at the next start, after a crash.

Each line carries a key made here, before its first insert (`input_journal.line_key`,
unique): offering a line again stores nothing new and returns the row that exists.
An insert can commit as the connection drops (the client sees an error and spills
the lines), and a crash can fall between the spill's insert and its unlink; either
way the same lines are offered again, and without the key they were stored twice
and answered twice (issue 26).

A journaled message stays `pending` until its reply is delivered (`answered`, written
with the cycle's row before the reply is printed: src/loop/cycle_log.py); a command is
`done` once it ran. At start-up the pending messages of earlier runs are
handed back to the loop (replay), so a crash or an outage never leaves a message
unanswered; pending commands are not re-run (`skipped`): a `/quit` typed before a
crash must not end the next run.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from src.loop import spill
from src.loop.outage import DB_ERRORS, Outage
from src.text import clean_text

log = logging.getLogger(__name__)

# Lines already stored (same key) keep their row: the outer SELECT reads the table as it
# was before the statement, `stored` holds the rows this statement added.
_INSERT = """
WITH lines AS (
    SELECT key::uuid AS key, k, t, c, ord
      FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS s(key, k, t, c, ord)),
stored AS (
    INSERT INTO input_journal (session_id, line_key, kind, line, channel)
    SELECT $1, key, k, t, c FROM lines ORDER BY ord
    ON CONFLICT (line_key) DO NOTHING
    RETURNING id, line_key)
SELECT coalesce(s.id, j.id) AS id
  FROM lines l
  LEFT JOIN stored s ON s.line_key = l.key
  LEFT JOIN input_journal j ON j.line_key = l.key
 ORDER BY l.ord
"""
# the scratch row of a message the entry gate already kept carries its journal id
_REPLAY = """
SELECT j.id, j.line, j.channel,
       EXISTS (SELECT 1 FROM scratch_buffer b WHERE b.metadata->>'journal_id' = j.id::text) AS gated,
       EXISTS (SELECT 1 FROM scratch_buffer b WHERE b.metadata->>'journal_id' = j.id::text
                  AND b.metadata->>'memory_mode' = 'off') AS unkept
  FROM input_journal j
 WHERE j.state = 'pending' AND j.kind = 'message' AND j.session_id <> $1
 ORDER BY j.id
"""
_SKIP_COMMANDS = """
UPDATE input_journal SET state = 'skipped', finished_at = now()
 WHERE state = 'pending' AND kind = 'command' AND session_id <> $1
"""
_FINISH = "UPDATE input_journal SET state = $2, finished_at = now() WHERE id = ANY($1::bigint[]) AND state = 'pending'"
_ANSWERED = """
UPDATE input_journal SET state = 'answered', finished_at = now(), answered_session = $2, answered_cycle = $3
 WHERE id = ANY($1::bigint[]) AND state = 'pending'"""


def is_command(text: str) -> bool:
    """A slash command, also with leading spaces before the `/`."""
    return text.lstrip().startswith("/")


@dataclass
class Line:
    """One decoded input line; `id` is its journal row once it is in the database."""

    kind: str                      # message | command
    text: str
    notes: list[str] = field(default_factory=list)
    id: int | None = None
    gated: bool = False            # replayed: the entry gate kept it in an earlier run
    unkept: bool = False           # replayed: typed while the memory mode was off (src/loop/unkept.py)
    key: str = field(default_factory=lambda: str(uuid.uuid4()))   # input_journal.line_key
    channel: str = "terminal"      # where it came from: terminal | api | page | mcp (sql/161)

    @classmethod
    def decode(cls, raw: bytes | str, channel: str = "terminal") -> Line:
        cleaned = clean_text(raw)
        return cls("command" if is_command(cleaned.text) else "message", cleaned.text, cleaned.notes,
                   channel=channel)


class InputJournal:
    """Durable input for one session: database first, a spill file while it is away."""

    def __init__(self, pool: asyncpg.Pool, session_id: str, spill_dir: Path, *,
                 outage: Outage, notify: Callable[[str], None],
                 retry_base_s: float = 0.2, retry_max_s: float = 5.0, max_chars: int | None = None):
        self.pool = pool
        self.max_chars = max_chars        # a spilled line obeys the typed line's limit (src/loop/spill.py)
        self.session_id = session_id
        self.spill_dir = Path(spill_dir)
        self.spill_path: Path | None = None
        self.outage = outage
        self.notify = notify
        self.retry_base_s = retry_base_s
        self.retry_max_s = retry_max_s
        self._held: list[Line] = []       # spilled lines of this run, oldest first
        # set once earlier runs' unanswered messages are back in the loop: a message of this
        # run (the HTTP API's) waits for it, or it would be answered before older ones
        self.replayed = asyncio.Event()
        self._lock = asyncio.Lock()
        self._told = False
        # the id of the newest line typed at the terminal: a reply to an older one says which it answers
        self.newest: int | None = None

    async def open(self) -> list[Line]:
        """Name the spill file after this database, store what a crashed run spilled,
        skip the commands earlier runs never ran; return the messages to answer again (the
        caller hands them to the loop, then calls `replay_submitted`)."""
        row = await self.pool.fetchrow(
            "SELECT current_database() AS db, (SELECT system_identifier FROM pg_control_system()) AS sys")
        self.spill_path = self.spill_dir / f"{row['sys']}-{row['db']}.jsonl"
        spilled = await asyncio.to_thread(_read_spill, self.spill_path, self.max_chars)
        if spilled:
            await self._insert(spilled, session_id=f"{self.session_id}:spill")
            await asyncio.to_thread(self.spill_path.unlink, missing_ok=True)
            log.info("stored %d input line(s) a previous run held while the database was away",
                     len(spilled))
        await self.pool.execute(_SKIP_COMMANDS, self.session_id)
        rows = await self.pool.fetch(_REPLAY, self.session_id)
        if not rows:
            self.replayed.set()
        return [Line("message", r["line"], id=r["id"], gated=r["gated"], unkept=r["unkept"], channel=r["channel"])
                for r in rows]

    def replay_submitted(self) -> None:
        """The messages `open` returned are in the loop: this run's may follow."""
        self.replayed.set()

    async def append(self, lines: Sequence[Line]) -> None:
        """Make `lines` durable, in order: one statement, or the spill file when the
        database is away (or earlier lines are still held there, to keep the order)."""
        if not lines:
            return
        async with self._lock:
            if not self._held:
                try:
                    ids = await self._insert(lines)
                except DB_ERRORS as exc:
                    self.outage.down("input journal", exc)
                else:
                    self._stored(lines, ids)
                    return
            await asyncio.to_thread(_append_spill, self.spill_path, lines, self.session_id)
            self._held.extend(lines)
            if not self._told:
                self._told = True
                self.notify("database unavailable: your input is held (saved to "
                            f"{self.spill_path}) and will be stored and answered when it is back")

    def _stored(self, lines: Sequence[Line], ids: Sequence[int]) -> None:
        for line, i in zip(lines, ids, strict=True):
            line.id = i
        typed = [i for line, i in zip(lines, ids, strict=True) if getattr(line, "channel", "terminal") == "terminal"]
        self.newest = max([*typed, self.newest or 0]) or None

    def held(self) -> list[Line]:
        """The lines in the spill file now, oldest first (the database is away)."""
        return list(self._held)

    async def persisted(self, line: Line, stop: asyncio.Event | None = None) -> bool:
        """Wait until `line` is in the journal (moving the spill there with backoff);
        False when `stop` was set first."""
        delay = self.retry_base_s
        while line.id is None:
            if await self.flush_spill():
                continue
            if stop is not None and stop.is_set():
                return False
            await asyncio.sleep(delay)
            delay = min(self.retry_max_s, delay * 2)
        return True

    async def flush_spill(self) -> bool:
        """Move held lines into the journal; True when nothing is held any more."""
        async with self._lock:
            if not self._held:
                return True
            try:
                ids = await self._insert(self._held)
            except DB_ERRORS as exc:
                self.outage.down("input journal", exc)
                return False
            # the spill goes at once: anything between the insert and the unlink that
            # fails (a closed stdout under the notice, seen) made the next start offer
            # the same lines again (their keys now make that store nothing)
            await asyncio.to_thread(self.spill_path.unlink, missing_ok=True)
            self._stored(self._held, ids)
            held, self._held, self._told = len(self._held), [], False
            self.outage.up("input journal")
            self.notify(f"database is back: {held} held input line(s) stored")
            return True

    async def answered(self, ids: Sequence[int], conn: asyncpg.Connection | None = None, *,
                       cycle: int | None = None) -> None:
        """Replies to these messages were delivered (inside `conn`'s transaction when given), by
        this session's `cycle`: its thought_log row holds the reply (src/api/messages.py)."""
        ids = [i for i in ids if i is not None]
        if ids:
            await (conn or self.pool).execute(_ANSWERED, ids, self.session_id, cycle)

    async def done(self, line_id: int) -> None:
        """This command ran."""
        await self._finish([line_id], "done")

    async def _finish(self, ids: Sequence[int], state: str, conn: asyncpg.Connection | None = None) -> None:
        ids = [i for i in ids if i is not None]
        if ids:
            await (conn or self.pool).execute(_FINISH, ids, state)

    async def _insert(self, lines: Sequence[Line], session_id: str | None = None) -> list[int]:
        """Store `lines` in order; a line whose key is stored already keeps its row. The ids, in order."""
        rows = await self.pool.fetch(_INSERT, session_id or self.session_id, [_key(x) for x in lines],
                                     [x.kind for x in lines], [x.text for x in lines],
                                     [getattr(x, "channel", "terminal") for x in lines])
        return [r["id"] for r in rows]


def _key(line: Line) -> str:
    """The line's key; an object without one (a caller's plain line) is stored as a new line."""
    return getattr(line, "key", None) or str(uuid.uuid4())


def _append_spill(path: Path, lines: Sequence[Line], session_id: str) -> None:
    spill.append(path, [(x.kind, x.text, x.key, getattr(x, "channel", "terminal")) for x in lines], session_id)


def _read_spill(path: Path, max_chars: int | None = None) -> list[Line]:
    return [Line(x.kind, x.text, key=x.key, channel=x.channel) for x in spill.read(path, max_chars)]
