"""Step 3 of a cycle (plan §3.2, §3.4): recall for the winner's text.

The turn's cue (src/recall/retrieval.py `Cue`): the winner's text and vector, the
attention focus (context inertia: the previous focus bleeds into this one's activation),
the identity layers as attention re-read them this cycle, the gut's emotional alignment,
and the last context's situational memories as spreading's seeds; the DMN reaches two
hops. Working memory (unflushed scratch rows) comes back beside the memories, except the
turn's own rows: they are the question, not an answer to it. Two calls, so the cycle can
start the prompt's reads between them: `search` (the reads) and `rank` (the scoring).
A failing recall leaves the cycle without memories and says so (issue 11).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import numpy as np

from src.context.assembly import ContextAssembler
from src.errors import ProviderError
from src.loop.attending import Attended
from src.loop.conversation import Conversation
from src.loop.degraded import Shortfalls
from src.loop.outage import DB_ERRORS
from src.recall.retrieval import Cue, Found, Retrieval, Retriever


class Recalling:
    """The recall step; it keeps no state of its own (inertia is the assembler's)."""

    def __init__(self, retriever: Retriever, assembler: ContextAssembler, conversation: Conversation, *,
                 rng: np.random.Generator, dmn_hops: int,
                 emotional: Callable[[np.ndarray], np.ndarray] | None = None):
        """`emotional`: the gut's alignment (None: without a gut, the neutral 0.5)."""
        self.retriever = retriever
        self.assembler = assembler
        self.conversation = conversation
        self.rng = rng
        self.dmn_hops = dmn_hops
        self.emotional = emotional

    def cue(self, attended: Attended) -> Cue:
        """What this turn recalls with."""
        winner = attended.winner
        context_vecs = [self.assembler.focus(winner.embedding).vector] if winner.embedding is not None else []
        return Cue(winner.text, vec=winner.embedding, context_vecs=context_vecs, layer_vecs=attended.layer_vecs,
                   emotional=self.emotional, active_ids=self.conversation.active_ids,
                   hops=self.dmn_hops if winner.source == "dmn" else 1, exclude_scratch=attended.inputs.kept,
                   logged_query=winner.record_text)

    async def search(self, attended: Attended, shortfalls: Shortfalls, now: datetime) -> Found | None:
        """The recall's reads; None when recall is unavailable this cycle (said in `shortfalls`)."""
        try:
            return await self.retriever.search(self.cue(attended), rng=self.rng, now=now)
        except (ProviderError, *DB_ERRORS) as exc:
            shortfalls.note("memories", exc)
            return None

    async def rank(self, found: Found | None, shortfalls: Shortfalls) -> Retrieval | None:
        """What the winner brings back, its bookkeeping in `writes`; None when unavailable."""
        if found is None:
            return None
        try:
            return await self.retriever.rank(found)
        except (ProviderError, *DB_ERRORS) as exc:
            shortfalls.note("memories", exc)
            return None
