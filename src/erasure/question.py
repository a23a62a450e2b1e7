"""Forgetting at the prompt: the listing, "Forget these N? (y/n/numbers)", the answer (issue 39).

`/forget ID…`, `/forget <words>` and a forget request said in conversation
(src/erasure/request.py) all end here: what would be forgotten is listed, and the
guardian's next line answers — "y" forgets everything listed, numbers forget those items,
"n" nothing; any other line closes the question and is read as an ordinary message, as
copilot's "Keep these?" is (src/gates/copilot.py). Nothing is forgotten on the mind's own
judgement: only a line typed at the prompt opens or answers the question.

After a forget, what this process holds of the words is dropped at once (`on_forgotten`:
the running loop's src/loop/forgetting.py), and the input spill files are scrubbed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import asyncpg

from src.erasure import matches
from src.erasure.correct import correct
from src.erasure.forget import Forgotten, forget
from src.erasure.matches import Match
from src.erasure.spill import scrub_spill
from src.providers.embedding import Embedder

log = logging.getLogger(__name__)

OnForgotten = Callable[[Forgotten, "int | None"], object]


@dataclass(frozen=True)
class _Open:
    found: list[Match]
    words: str | None
    who: str
    also: tuple[str, ...] = ()


class ForgetQuestion:
    """The process's forget desk: at most one open question at a time."""

    def __init__(self, pool: asyncpg.Pool, embedder: Embedder | None, spill_dir: Path,
                 on_forgotten: OnForgotten | None = None, between_turns: asyncio.Lock | None = None):
        self.pool = pool
        self.embedder = embedder
        self.spill_dir = Path(spill_dir)
        self.on_forgotten = on_forgotten
        self._open: _Open | None = None
        # the loop's turn lock: a forget runs between two turns, never beside one that would
        # write its rows (thought_log, gut deltas) after the words were scrubbed
        self.between_turns = between_turns or asyncio.Lock()

    @property
    def open(self) -> bool:
        return self._open is not None

    async def ask(self, *, ids: Sequence[int] = (), words: str | None = None, who: str = "guardian command",
                  each_word: bool = False, request: tuple[int | None, str] | None = None,
                  now: datetime | None = None) -> str:
        """List what a forget of `ids` or `words` would take and open the question.
        `each_word`: a text must hold each content word, not the words as typed;
        `request`: the journal id and text of the line that asked (not listed; scrubbed
        with the rest once something is forgotten)."""
        now = now or datetime.now(UTC)
        missing: list[int] = []
        if ids:
            found, missing = await matches.by_ids(self.pool, ids)
        else:
            exclude = [request[0]] if request is not None and request[0] is not None else []
            found = await matches.by_words(self.pool, words or "", each_word=each_word, exclude_lines=exclude)
        note = f"no memory {', '.join(f'#{i}' for i in missing)}\n" if missing else ""
        if not found:
            self._open = None
            what = "those words" if words else "those ids"
            return note + f"nothing I keep holds {what}; nothing to forget"
        self._open = _Open(found, words if not ids and not each_word else None, who,
                           (request[1],) if request is not None else ())
        head = "These would be forgotten, with what was built from them and every trace of their words:"
        return f"{note}{head}\n{matches.listing(found, now)}\n{matches.question(len(found))}"

    async def answer(self, line: str, now: datetime | None = None) -> str | None:
        """Consume `line` when it answers the open question: the reply. None when it is not an
        answer (the question closes; the line is an ordinary message)."""
        if self._open is None:
            return None
        picked = matches.choose(line, self._open.found)
        if picked is None:
            self._open = None
            return None
        if isinstance(picked, str):
            return picked            # numbers not listed: the question stays open
        question, self._open = self._open, None
        if not picked:
            return "nothing was forgotten"
        words = question.words if len(picked) == len(question.found) else None
        async with self.between_turns:
            receipt, gone = await forget(self.pool, self.embedder, picked, who=question.who, words=words,
                                         also=question.also, now=now)
            spilled = scrub_spill(self.spill_dir, gone.needles)
            if self.on_forgotten is not None:
                self.on_forgotten(gone, receipt.id)
        return receipt.text() + (f"\n  input spill: {spilled} lines replaced" if spilled else "")

    async def correct(self, args: str, now: datetime | None = None) -> str:
        """`/correct ID new text [--forget-old]`: the new memory's id, and the forget's receipt."""
        parts = args.split(None, 1)
        if len(parts) < 2 or not parts[0].lstrip("#").isdigit():
            return "usage: /correct ID new text   (add --forget-old at the end to forget the old one)"
        memory_id, text = int(parts[0].lstrip("#")), parts[1].strip()
        forget_old = text.endswith("--forget-old")
        text = text.removesuffix("--forget-old").strip()
        new_id = await correct(self.pool, self.embedder, memory_id, text, now=now)
        reply = f"memory #{new_id} corrects #{memory_id}"
        if not forget_old:
            return reply + " (the old is kept as earlier; /forget " + str(memory_id) + " removes it)"
        found, _ = await matches.by_ids(self.pool, [memory_id])
        async with self.between_turns:
            receipt, gone = await forget(self.pool, self.embedder, found, who="correction", now=now)
            scrub_spill(self.spill_dir, gone.needles)
            if self.on_forgotten is not None:
                self.on_forgotten(gone, receipt.id)
        return reply + "\n" + receipt.text()
