"""The replies the loop delivered, by the input-journal ids they answer (issue 41).

The terminal prints the replies to its own lines as they are delivered; another channel
(the HTTP API, the chat page, an MCP client: `input_journal.channel`, sql/161) asks for the
reply to *its* message, and the terminal shows that reply only as a quiet line. The loop posts each delivered reply here under the journal
ids of the turn's messages (`Acting.deliver`), and a waiter on one of those ids wakes.
It holds the reply as delivered — in memory mode off that is the only place its words are
(the logs keep a placeholder) — for the newest `keep` ids only; an older or restarted
message's reply is read from the thought_log row its journal line points to
(src/api/messages.py).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from src.text import excerpt

# how the terminal names a channel in its quiet lines
CHANNEL_NAMES = {"terminal": "the terminal", "api": "the HTTP API", "page": "the chat page", "mcp": "an MCP client"}


def quiet_line(what: str, channel: str, journal_ids: Sequence[int], text: str) -> str:
    """The terminal's one line about a message of another channel: `what` is "from" (it came
    in) or "answered on" (its reply went back there)."""
    ids = ", ".join(str(i) for i in journal_ids)
    noun = "message" if len(journal_ids) == 1 else "messages"
    return f"({what} {CHANNEL_NAMES.get(channel, channel)}, {noun} {ids}) {excerpt(text, 160)}"


@dataclass(frozen=True)
class Reply:
    text: str
    at: datetime
    together: int = 1           # messages the turn answered at once (a combined turn)


class ReplyBoard:
    """Delivered replies by journal id, and the waiters on them (one event loop)."""

    def __init__(self, keep: int = 1000):
        self.keep = keep
        self._replies: OrderedDict[int, Reply] = OrderedDict()
        self._waiters: dict[int, list[asyncio.Future]] = {}

    def post(self, journal_ids: Sequence[int], text: str, at: datetime) -> None:
        """The reply to the messages `journal_ids` was delivered."""
        reply = Reply(text, at, len(journal_ids))
        for jid in journal_ids:
            self._replies[jid] = reply
            self._replies.move_to_end(jid)
            for waiter in self._waiters.pop(jid, []):
                if not waiter.done():
                    waiter.set_result(reply)
        while len(self._replies) > self.keep:
            self._replies.popitem(last=False)

    def get(self, journal_id: int) -> Reply | None:
        return self._replies.get(journal_id)

    async def wait(self, journal_id: int, timeout_s: float) -> Reply | None:
        """The reply to `journal_id`, waiting up to `timeout_s`; None when it has not come."""
        if (reply := self._replies.get(journal_id)) is not None:
            return reply
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(journal_id, []).append(waiter)
        try:
            return await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            return None
        finally:
            left = [w for w in self._waiters.get(journal_id, []) if w is not waiter]
            if left:
                self._waiters[journal_id] = left
            else:
                self._waiters.pop(journal_id, None)


__all__ = ["Reply", "ReplyBoard"]
