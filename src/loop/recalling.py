"""Step 3 of a cycle (plan §3.2, §3.4): recall for the winner's text.

Hybrid search, spreading from the last context's situational memories, ACT-R; the
DMN reaches two hops. Context inertia: the previous focus bleeds into this one's
activation. Working memory (unflushed scratch rows) comes back beside the memories,
except the turn's own rows: they are the question, not an answer to it. A failing
recall leaves the cycle without memories and says so (issue 11).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import numpy as np

from src.context.assembly import ContextAssembler
from src.db.write_behind import WriteBehind
from src.errors import ProviderError
from src.loop.attending import Attended
from src.loop.conversation import Conversation
from src.loop.degraded import Shortfalls
from src.loop.outage import DB_ERRORS
from src.recall.retrieval import Retrieval, Retriever


class Recalling:
    """The recall step; it keeps no state of its own (inertia is the assembler's)."""

    def __init__(self, retriever: Retriever, assembler: ContextAssembler, conversation: Conversation, *,
                 rng: np.random.Generator, dmn_hops: int, write_behind: WriteBehind | None = None):
        self.retriever = retriever
        self.write_behind = write_behind      # the retrieval's bookkeeping is queued there
        self.assembler = assembler
        self.conversation = conversation
        self.rng = rng
        self.dmn_hops = dmn_hops

    async def recall(self, attended: Attended, now: datetime, shortfalls: Shortfalls,
                     searched: Callable[[], object] | None = None) -> Retrieval | None:
        """What the winner brings back; None when recall is unavailable this cycle.
        `searched`: called as the search returns (src/recall/retrieval.py)."""
        winner = attended.winner
        context_vecs = [self.assembler.focus(winner.embedding).vector] if winner.embedding is not None else []
        try:
            return await self.retriever.retrieve(
                winner.text, rng=self.rng, now=now, context_vecs=context_vecs,
                active_ids=self.conversation.active_ids, hops=self.dmn_hops if winner.source == "dmn" else 1,
                query_vec=winner.embedding, exclude_scratch=attended.inputs.kept, logged_query=winner.record_text,
                write_behind=self.write_behind, searched=searched)
        except (ProviderError, *DB_ERRORS) as exc:
            shortfalls.note("memories", exc)
            return None
