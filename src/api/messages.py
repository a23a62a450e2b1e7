"""A message sent over the HTTP API: durable before it is acknowledged, answered once, and
its reply found again (issue 41 item 1).

The line goes through the input journal like a typed one (src/loop/input_journal.py): stored
(or spilled while the database is away) before the API answers, replayed by the next start
when a crash leaves it unanswered. The client may name the message with an
`Idempotency-Key` (a UUID): the journal's `line_key`, so sending it again stores nothing new
and never queues it twice; the reply then is the first one.

The reply: the loop posts each delivered reply under its journal ids (src/loop/replies.py),
where a waiting request finds it; after a restart (or for a message answered before this
process) it is the output of the thought_log row the journal line points to
(`answered_session`, `answered_cycle`, sql/158).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg

from src.loop.input_journal import InputJournal, Line
from src.loop.intake import Origin
from src.loop.replies import ReplyBoard, quiet_line
from src.loop.spill import CHANNELS

log = logging.getLogger(__name__)

Submit = Callable[..., Awaitable[Any]]      # CognitiveLoop.submit("user", text, origin=…)

_STATE = """
SELECT j.id, j.session_id, j.state, j.received_at, j.finished_at, t.output
  FROM input_journal j
  LEFT JOIN thought_log t ON t.session_id = j.answered_session AND t.cycle = j.answered_cycle
 WHERE j.id = $1 AND j.kind = 'message'"""


class MessageError(Exception):
    """A message the API refuses, with its HTTP status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Sent:
    """What the API says about a message: its id once stored, its key, its state, the reply."""

    key: str | None                 # the client's (or a new) Idempotency-Key; None when read by id
    id: int | None
    state: str                      # held | pending | answered
    reply: str | None = None

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "state": self.state}
        if self.key is not None:
            out["key"] = self.key
        if self.reply is not None:
            out["reply"] = self.reply
        if self.state != "answered":
            out["poll"] = f"/api/v1/messages/{self.id}" if self.id is not None else f"/api/v1/messages?key={self.key}"
        return out


def idempotency_key(raw: str | None) -> str:
    """The client's key as the journal's line_key (a UUID), or a new one."""
    if not raw:
        return str(uuid.uuid4())
    try:
        return str(uuid.UUID(raw.strip()))
    except ValueError:
        raise MessageError(400, "Idempotency-Key must be a UUID (e.g. 3f2b8c1e-…)") from None


class Messages:
    """Messages in and replies out, for one running mind."""

    def __init__(self, pool: asyncpg.Pool, journal: InputJournal, submit: Submit, replies: ReplyBoard, *,
                 session_id: str, max_chars: int, stop: asyncio.Event | None = None,
                 announce: Callable[[str], None] | None = None):
        self.pool, self.journal, self.submit, self.replies = pool, journal, submit, replies
        self.session_id, self.max_chars, self.stop = session_id, max_chars, stop
        # the terminal's quiet line for a message from elsewhere (its reply is printed there too)
        self.announce = announce
        self._queued: set[int] = set()          # journal ids this process handed to the loop
        self._tasks: set[asyncio.Task] = set()

    def check(self, text: object) -> str:
        """The message text, or MessageError saying what is wrong with it."""
        if not isinstance(text, str) or not text.strip():
            raise MessageError(400, 'the body needs "text": a non-empty string')
        if len(text) > self.max_chars:
            raise MessageError(413, f"the message has {len(text):,} characters, more than the "
                                    f"{self.max_chars:,} allowed (agent.max_input_chars); nothing was stored")
        return text

    async def send(self, text: str, key: str, wait_s: float, *, channel: str = "api") -> Sent:
        """Journal the message (durable before this returns), hand it to the loop once, and
        wait up to `wait_s` for its reply. `channel`: api, page or mcp (its reply goes back
        there; the terminal shows it as a quiet line)."""
        if channel not in CHANNELS or channel == "terminal":
            raise MessageError(400, f"unknown channel {channel!r}: one of api, page, mcp")
        line = Line.decode(self.check(text), channel=channel)
        if line.kind == "command":
            raise MessageError(400, "a line starting with '/' is a command; the API's endpoints do what "
                                    "the commands do (GET /api/v1/openapi.json lists them)")
        line.key = key
        await self.journal.append([line])
        if line.id is None:         # held in the spill file: stored and queued when the database is back
            self._later(line)
            return Sent(key, None, "held")
        await self._queue_once(line)
        sent = await self.state(line.id, wait_s)
        return Sent(key, sent.id, sent.state, sent.reply)

    async def state(self, journal_id: int, wait_s: float = 0.0) -> Sent:
        """The message's state and reply, waiting up to `wait_s` for a reply not yet delivered."""
        row = await self.pool.fetchrow(_STATE, journal_id)
        if row is None:
            raise MessageError(404, f"no message {journal_id}")
        key = None
        if row["state"] == "answered":
            posted = self.replies.get(journal_id)
            return Sent(key, journal_id, "answered", posted.text if posted else row["output"] or "")
        if row["state"] != "pending":
            return Sent(key, journal_id, row["state"])
        reply = await self.replies.wait(journal_id, wait_s) if wait_s > 0 else self.replies.get(journal_id)
        if reply is not None:
            return Sent(key, journal_id, "answered", reply.text)
        return Sent(key, journal_id, "pending")

    async def by_key(self, key: str, wait_s: float = 0.0) -> Sent:
        """A message by its Idempotency-Key: held (the database was away when it came), or as
        `state` tells it once stored."""
        if any(line.key == key for line in self.journal.held()):
            return Sent(key, None, "held")
        journal_id = await self.pool.fetchval(
            "SELECT id FROM input_journal WHERE line_key = $1::uuid AND kind = 'message'", key)
        if journal_id is None:
            raise MessageError(404, f"no message with the key {key}")
        sent = await self.state(journal_id, wait_s)
        return Sent(key, sent.id, sent.state, sent.reply)

    async def _queue_once(self, line: Line) -> None:
        """Hand the line to the loop unless it already was: by this process (a client's retry
        with the same key), or by an earlier run (replayed at start-up, or answered)."""
        if line.id in self._queued:
            return
        # marked before the read: a second request with the same key (a double click on the
        # chat page) arriving during it must find the mark, not queue the message again. A
        # line not queued for the reasons below never needs queueing by this process either.
        self._queued.add(line.id)
        try:
            row = await self.pool.fetchrow("SELECT session_id, state FROM input_journal WHERE id = $1", line.id)
        except BaseException:
            self._queued.discard(line.id)
            raise
        if row is None or row["state"] != "pending" or row["session_id"] != self.session_id:
            return
        await self.journal.replayed.wait()      # earlier runs' messages go first (InputJournal.open)
        if self.announce is not None:
            self.announce(quiet_line("from", line.channel, [line.id], line.text))
        await self.submit("user", line.text, origin=Origin(ref=line.id, channel=line.channel))

    def _later(self, line: Line) -> None:
        async def when_stored() -> None:
            if await self.journal.persisted(line, self.stop):
                await self._queue_once(line)
        task = asyncio.create_task(when_stored(), name=f"api-held-{line.key[:8]}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


__all__ = ["MessageError", "Messages", "Sent", "idempotency_key"]
