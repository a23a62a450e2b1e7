"""Deep-pass phase `skills`: recurring procedural patterns become skill proposals (issue 17).

The pass clusters the newest procedural memories (leader clustering on their stored
embeddings, src/consolidation/clustering.py); a cluster of at least
`min_memories` that was never proposed costs one drafting call and becomes an
approval of kind 'skill' (src/skills/proposal.py). Bounded: at most
`max_per_pass` proposals, and never past the pass's call budget. Safe to re-run
after a crash: a cluster's fingerprint is unique in skill_proposals.
"""

from __future__ import annotations

import asyncio
import logging

import numpy as np

from src.consolidation.clustering import fingerprint, leader_clusters
from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.consolidation.evolution import approval_kinds
from src.consolidation.evolution import approvals_repository as approvals_repo
from src.skills.proposal import (
    KIND,
    apply_proposal,
    propose_skill,
    proposed_fingerprints,
    reject_proposal,
)
from src.skills.repository import SkillError
from src.skills.settings import SkillProposalSettings

log = logging.getLogger(__name__)

_PROCEDURAL = """
SELECT id, embedding FROM memories
 WHERE memory_type = 'procedural' AND embed_model = $1 AND embedding IS NOT NULL
 ORDER BY created_at DESC, id DESC LIMIT $2
"""


def proposal_settings(ctx: object) -> SkillProposalSettings:
    """The `skills` section of the pass's consolidation settings (defaults when absent)."""
    found = getattr(getattr(ctx, "settings", None), "skills", None)
    return found if isinstance(found, SkillProposalSettings) else SkillProposalSettings()


async def run(ctx: DeepPassContext) -> PhaseResult:
    """Propose skills from clusters of procedural memories (see the module doc)."""
    cfg = proposal_settings(ctx)
    result = PhaseResult()
    rows = await ctx.pool.fetch(_PROCEDURAL, ctx.embedder.model_name, cfg.scan)
    if len(rows) < cfg.min_memories:
        return result
    vecs = np.vstack([r["embedding"].to_numpy() for r in rows]).astype(np.float32)
    clusters = await asyncio.to_thread(leader_clusters, vecs, cfg.similarity, cfg.min_memories)
    members = [[rows[i]["id"] for i in c] for c in clusters]
    seen = await proposed_fingerprints(ctx.pool, [fingerprint(ids) for ids in members])
    for ids in members:
        if fingerprint(ids) in seen:
            result.add("already_proposed")
            continue
        if result.counts.get("proposed", 0) >= cfg.max_per_pass:
            break
        if not ctx.budget.can_spend():
            ctx.skip("skill proposals", "the pass's LLM call budget is spent")
            break
        try:
            proposal = await propose_skill(ctx.pool, ctx.llm, ids, enqueue=approvals_repo.insert_approval,
                                           now=ctx.now, purpose=ctx.purpose)
        except SkillError as exc:
            log.warning("skill proposal from memories %s failed: %s", ids, exc)
            result.add("failed")
            continue
        finally:
            ctx.budget.spend(1)
            result.calls += 1
        if proposal is not None:
            result.add("proposed")
    return result


async def _apply(ctx: approval_kinds.ApprovalContext, payload) -> approval_kinds.Applied:
    # ctx.db: the approval's transaction, so the skill and the decision commit together
    ok, message = await apply_proposal(ctx.db, payload, ctx.now)
    return approval_kinds.Applied(ok, message)


async def _reject(conn, _approval_id: int, payload, now) -> None:
    await reject_proposal(conn, payload, now)


approval_kinds.register(KIND, _apply)
approval_kinds.on_reject(KIND, _reject)
