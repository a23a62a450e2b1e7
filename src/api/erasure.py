"""Forget, correct and remember over the HTTP API (issue 41 item 1; the forget issue's verbs).

Forget asks first, as at the prompt: without `"confirm": true` it answers what would go (the
listing and a dry run's counts, nothing changed); with it, the forget runs between two turns
of the loop (its turn lock), writes its receipt (`who` 'api') and the running mind drops the
words at once (src/loop/forgetting.py). Correct stores the correction as the prompt's
/correct does. Remember admits a statement through the entry gate as the user's, as a typed
line is; the exit gate decides at its next flush whether it is kept — no reply, no model call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

from src.api.messages import MessageError
from src.erasure import matches
from src.erasure.correct import CorrectionError, correct
from src.erasure.forget import forget
from src.erasure.spill import scrub_spill
from src.gates.memory_gate import Gates
from src.providers.protocols import Embedder

#: The most memory ids one forget names.
MAX_IDS = 1000


@dataclass(frozen=True)
class Erasure:
    """What forgetting and remembering over the API use of the running mind."""

    pool: asyncpg.Pool
    embedder: Embedder
    spill_dir: Path
    gates: Gates
    between_turns: asyncio.Lock                          # the loop's turn lock
    on_forgotten: Callable[[Any, int | None], None] | None = None

    async def forget(self, body: dict[str, Any]) -> dict[str, Any]:
        ids, words = _what(body)
        confirm = body.get("confirm", False)
        if not isinstance(confirm, bool):
            raise MessageError(400, '"confirm" must be true or false')
        now = datetime.now(UTC)
        if ids:
            found, missing = await matches.by_ids(self.pool, ids)
            if missing and not found:
                raise MessageError(404, f"no memory {', '.join(f'#{i}' for i in missing)}")
        else:
            found, missing = await matches.by_words(self.pool, words), []
        listed = [{"kind": m.kind, "id": m.id, "text": m.text, "at": m.at.isoformat(), "detail": m.detail}
                  for m in found]
        if not found:
            return {"forgotten": False, "matches": [], "note": "nothing holds those words; nothing to forget"}
        if not confirm:
            receipt, _ = await forget(self.pool, None, found, who="api", words=words, dry_run=True, now=now)
            return {"forgotten": False, "matches": listed, "missing": missing, "would": _receipt(receipt),
                    "note": 'nothing was changed: send the same request with "confirm": true to forget these'}
        async with self.between_turns:
            receipt, gone = await forget(self.pool, self.embedder, found, who="api", words=words, now=now)
            spilled = scrub_spill(self.spill_dir, gone.needles)
            if self.on_forgotten is not None:
                self.on_forgotten(gone, receipt.id)
        return {"forgotten": True, "matches": listed, "missing": missing, "receipt": _receipt(receipt),
                "spill_lines_replaced": spilled}

    async def correct(self, body: dict[str, Any]) -> dict[str, Any]:
        memory_id, text = body.get("id"), body.get("text")
        if not isinstance(memory_id, int) or isinstance(memory_id, bool) or not isinstance(text, str) \
                or not text.strip():
            raise MessageError(400, 'the body needs "id" (a memory id) and "text" (what is true now)')
        forget_old = body.get("forget_old", False) is True
        try:
            new_id = await correct(self.pool, self.embedder, memory_id, text.strip())
        except CorrectionError as exc:
            raise MessageError(404 if str(exc).startswith("no memory") else 400, str(exc)) from None
        out: dict[str, Any] = {"id": new_id, "corrects": memory_id}
        if forget_old:
            out["forgot"] = await self.forget({"ids": [memory_id], "confirm": True})
        return out

    async def remember(self, text: str) -> dict[str, Any]:
        admitted = await self.gates.admit(text, source_tag="external_user", exchange=False)
        kept = admitted.scratch_id is not None
        return {"scratch_id": admitted.scratch_id, "state": "buffered" if kept else "dropped",
                "note": ("held in the scratch buffer: the exit gate decides at its next flush whether it "
                         "becomes a memory") if kept else "the entry gate did not keep it"}


def _what(body: dict[str, Any]) -> tuple[list[int], str | None]:
    ids, words = body.get("ids"), body.get("match")
    if (ids is None) == (words is None):
        raise MessageError(400, 'name what to forget: "ids" (memory ids) or "match" (words), one of the two')
    if ids is not None:
        if not isinstance(ids, list) or not ids or len(ids) > MAX_IDS or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 < i < 2**63 for i in ids):
            raise MessageError(400, f'"ids" must be a list of 1 to {MAX_IDS} memory ids')
        return ids, None
    if not isinstance(words, str) or not words.strip():
        raise MessageError(400, '"match" needs some words')
    return [], words


def _receipt(receipt) -> dict[str, Any]:
    return {"id": receipt.id, "who": receipt.who, "at": receipt.at.isoformat(), "memories": receipt.memories,
            "rewritten": receipt.rewritten, "counts": receipt.counts, "dry_run": receipt.dry_run,
            "text": receipt.text()}


__all__ = ["Erasure"]
