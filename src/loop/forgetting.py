"""What a running mind drops when the guardian forgets something (issue 39 item 2).

A forget (src/erasure/forget.py) removes the words from the database in one transaction;
this process still holds some of them in memory, and they go at once:

- the conversation window's messages holding the words (the prompt's history), and the
  replies kept for the "not a repeat" check;
- a message still waiting in the attention queue that holds them keeps its place (it is
  answered) with the placeholder as its text;
- the situational memories carried to the next cycle (`active_ids`: recall's spreading
  seeds) and the identity cache (re-scanned at the next cycle);
- copilot's held items that were forgotten (never asked about again).

Working memory needs nothing here: it is read from the scratch rows each cycle, and the
forget removed those. A forget run by another process (the CLI) is seen by its receipt:
each cycle compares the newest receipt id with the last one seen, and this process, which
cannot know those words, empties its conversation window (the words may be in it) and
re-scans the rest. A cycle whose check fails (the database away) checks again next cycle.
"""

from __future__ import annotations

import logging
from typing import Protocol

import asyncpg

from src.context.assembly import ContextAssembler
from src.db.pool import DB_ERRORS
from src.erasure import receipt
from src.erasure.forget import Forgotten
from src.erasure.placeholder import forgotten_text, holds
from src.loop.attention_queue import AttentionQueue
from src.loop.conversation import Conversation

log = logging.getLogger(__name__)


class HeldQuestion(Protocol):
    def settled(self, ids: list[int]) -> None: ...


class Forgetting:
    """The running mind's side of a forget."""

    def __init__(self, pool: asyncpg.Pool, conversation: Conversation, assembler: ContextAssembler,
                 held: HeldQuestion, queue: AttentionQueue):
        self.pool = pool
        self.queue = queue
        self.conversation = conversation
        self.assembler = assembler
        self.held = held
        self.seen: int | None = None        # the newest receipt id this process has acted on

    def apply(self, gone: Forgotten, receipt_id: int | None = None) -> int:
        """Drop what `gone` names from memory; how many window messages went."""
        found = gone.needles
        c = self.conversation
        dropped = c.window.drop(lambda text: holds(text, found))
        self.queue.rewrite(lambda text: forgotten_text(text) if holds(text, found) else text)
        c.said = [s for s in c.said if not holds(s, found)]
        removed = set(gone.memory_ids)
        c.active_ids = [i for i in c.active_ids if i not in removed]
        self.assembler.identity_cache.invalidate()
        if gone.scratch_ids:
            self.held.settled(list(gone.scratch_ids))
        if receipt_id is not None:
            self.seen = max(self.seen or 0, receipt_id)
        return dropped

    async def check(self) -> bool:
        """Act on a forget another process made since the last check; whether there was one."""
        try:
            newest = await receipt.newest(self.pool)
        except DB_ERRORS:
            return False
        if self.seen is None:           # the first check: what came before this process is done
            self.seen = newest
            return False
        if newest <= self.seen:
            return False
        self.seen = newest
        c = self.conversation
        dropped = c.window.clear()
        c.said, c.active_ids = [], []
        self.assembler.identity_cache.invalidate()
        log.info("a forget by another process (receipt #%d): the conversation window emptied (%d messages)",
                 newest, dropped)
        return True
