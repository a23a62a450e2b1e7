"""Skills proposed by deep consolidation from a recurring procedural pattern.

A cluster of `procedural` memories (how-to instructions the mind kept) is a
pattern the mind has met more than once. `propose_skill` asks System 1 to distil
it into a SkillDraft and puts the draft in the operator's approval queue (kind
'skill'): nothing becomes a skill without `/approve`. `apply_proposal` is what
approving runs; `reject_proposal` what rejecting runs. A cluster (its fingerprint,
the sorted member ids) is proposed once, whatever the answer.

The approval queue belongs to consolidation; this module takes its `enqueue`
function as an argument, so it is tested against the database on its own.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from src.providers.protocols import LanguageModel
from src.skills import repository as repo
from src.skills.drafting import SkillDraft, draft, save_draft
from src.skills.prompt import one_line
from src.skills.prompts import procedures_material

log = logging.getLogger(__name__)

KIND = "skill"
#: enqueue(conn, kind, payload, reason, now) -> approval id
Enqueue = Callable[[asyncpg.Connection, str, Mapping[str, Any], str, datetime], Awaitable[int]]
MEMORY_CHARS = 1500


@dataclass(frozen=True)
class Proposal:
    id: int
    approval_id: int
    draft: SkillDraft
    memory_ids: tuple[int, ...]


def fingerprint(memory_ids: Sequence[int]) -> str:
    """A cluster's identity: its sorted member ids, hashed."""
    return hashlib.sha256(",".join(str(i) for i in sorted(set(memory_ids))).encode()).hexdigest()[:32]


async def proposed_fingerprints(db: repo.Executor, prints: Sequence[str]) -> set[str]:
    """Which of `prints` were proposed already (in any state)."""
    rows = await db.fetch("SELECT fingerprint FROM skill_proposals WHERE fingerprint = ANY($1::text[])",
                          list(prints))
    return {r["fingerprint"] for r in rows}


async def propose_skill(pool: asyncpg.Pool, llm: LanguageModel, memory_ids: Sequence[int], *,
                        enqueue: Enqueue, now: datetime, purpose: str = "consolidation:skills",
                        max_tokens: int = 1024) -> Proposal | None:
    """Draft a skill from the procedural memories `memory_ids` and queue it for approval.

    None when the cluster was proposed before or holds no procedural memory. Raises
    SkillError when the model cannot draft (offline, provider failure).
    """
    rows = await pool.fetch(
        """SELECT id, content FROM memories WHERE id = ANY($1::bigint[]) AND memory_type = 'procedural'
            ORDER BY id""", sorted(set(memory_ids)))
    found = [r["id"] for r in rows]
    fp = fingerprint(found)       # the procedural members are the pattern
    if not rows or await proposed_fingerprints(pool, [fp]):
        return None
    # consolidation's calls are isolated meta calls: no identity, no conversation
    value = await draft(llm, procedures_material(rows, MEMORY_CHARS), purpose=purpose, max_tokens=max_tokens, isolated=True)
    async with pool.acquire() as conn, conn.transaction():
        proposal_id = await conn.fetchval(
            """INSERT INTO skill_proposals (fingerprint, memory_ids, draft, created_at)
               VALUES ($1, $2, $3::jsonb, $4) ON CONFLICT (fingerprint) DO NOTHING RETURNING id""",
            fp, found, value.model_dump_json(), now)
        if proposal_id is None:      # a concurrent pass proposed the same cluster first
            return None
        reason = (f"skill {value.label!r} from {len(found)} procedural memories: "
                  f"{one_line(value.when_to_use, 200)}")
        approval_id = await enqueue(conn, KIND, {"proposal_id": proposal_id, "memory_ids": found,
                                                 **value.model_dump()}, reason, now)
        await conn.execute("UPDATE skill_proposals SET approval_id = $2 WHERE id = $1", proposal_id, approval_id)
    # the label is the model's summary of the user's procedure (issue 39): at DEBUG
    log.info("skill proposal #%d from memories %s (approval #%d)", proposal_id, found, approval_id)
    log.debug("skill proposal #%d: %r", proposal_id, value.label)
    return Proposal(proposal_id, approval_id, value, tuple(found))


async def apply_proposal(db: repo.Executor, payload: Mapping[str, Any], now: datetime) -> tuple[bool, str]:
    """Approving a proposal: create the skill (under a free label); (ok, message)."""
    row = await db.fetchrow("SELECT status, memory_ids, draft FROM skill_proposals WHERE id = $1",
                            payload.get("proposal_id"))
    if row is None:
        return False, f"no skill proposal #{payload.get('proposal_id')}"
    if row["status"] != "pending":
        return False, f"skill proposal #{payload['proposal_id']} was already {row['status']}"
    value = SkillDraft.model_validate(json.loads(row["draft"]))
    skill = await save_draft(db, value, {"origin": "consolidation", "memory_ids": list(row["memory_ids"]),
                                         "approval_id": payload.get("approval_id")})
    await db.execute("""UPDATE skill_proposals SET status = 'approved', skill_id = $2, decided_at = $3
                         WHERE id = $1""", payload["proposal_id"], skill.id, now)
    return True, f"skill {skill.label!r} saved from {len(row['memory_ids'])} procedural memories"


async def reject_proposal(db: repo.Executor, payload: Mapping[str, Any], now: datetime) -> None:
    """Rejecting a proposal: remember it, so the cluster is not proposed again."""
    await db.execute("""UPDATE skill_proposals SET status = 'rejected', decided_at = $2
                         WHERE id = $1 AND status = 'pending'""", payload.get("proposal_id"), now)
