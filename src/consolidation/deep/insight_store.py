"""Writing one insight (plan §4.2): through integrity.screen, then as a derived memory.

Before the screen, a date stamp the model copied from its evidence is taken off its end, and
an insight the store already holds word for word (case and spacing aside) is not written again.

The insights phase and the DMN's associations (`dmn_inputs.py`) store their insights
here. Its prior is its evidence's (boundaries and seeds left out); its evidence keeps its
weight (an insight does not supersede what it was drawn from).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from src.consolidation.deep import memories_repository
from src.consolidation.deep.derived import DerivedMemory, write_derived
from src.consolidation.deep.integrity import screen
from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.recall.when import without_stamp
from src.text import excerpt, size

log = logging.getLogger(__name__)


async def store_insight(ctx: DeepPassContext, key: str, text: str, cited: list[int], question: str,
                        result: PhaseResult, *, counted: str = "insights",
                        metadata: Mapping[str, Any] | None = None) -> None:
    """Write one insight if integrity.screen lets it rest on what it cites (counted as
    `counted`); else log and count `refused_<reason>`. Done keys are skipped."""
    if key in ctx.done:
        return
    # a small model copies the date stamps of the evidence it was shown (src/recall/when.py)
    text = without_stamp(text)
    if await memories_repository.insight_exists(ctx.pool, text):
        # the same insight again (one answer said it four times): nothing new to write
        result.add(f"duplicate_{counted}")
        return
    deep = ctx.settings.deep
    rows = await memories_repository.memories_by_id(ctx.pool, cited)
    refusal = await screen(ctx.embedder, text, rows,
                           citation_floor=ctx.settings.thresholds_for(ctx.embedder.model_name).insight_citation,
                           copy_overlap=deep.insight_copy_overlap, subject_overlap=deep.boundary_subject_overlap)
    if refusal is not None:
        # the detail names ids and measures only; the insight's words at DEBUG (issue 39)
        log.info("deep pass %d: %s (%s) refused: %s", ctx.pass_id, counted.rstrip("s").replace("_", " "),
                 size(text), refusal.detail)
        log.debug("refused insight: %r", excerpt(text, 120))
        result.add(f"refused_{refusal.reason}")
        return
    new_id = await write_derived(
        ctx, DerivedMemory(text, "reflection", sources=cited, via="insight",
                           metadata={"kind": "insight", "via": "insight", "question": question,
                                     **(metadata or {})}),
        key=key, contradict_sources=False)
    if new_id is not None:
        result.add(counted)
        ctx.announce.append(text)
