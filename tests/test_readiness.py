"""/readiness reads the ten milestones of plan §5.2 from the mind's own tables."""

from __future__ import annotations

from src.bootstrap.readiness import format_readiness, readiness


async def test_newborn_mind_has_reached_nothing(pool):
    achievements = await readiness(pool)
    assert len(achievements) == 10
    assert all(a.reached_at is None for a in achievements)
    text = format_readiness(achievements)
    assert text.splitlines()[0] == "Readiness: 0/10 achievements"
    assert text.splitlines()[1] == " [ ]  1. First memory formation (entry → scratch → exit → persist) — not yet"


async def test_milestones_follow_the_data(pool):
    mid = await pool.fetchval(
        "INSERT INTO memories (content, metadata) VALUES ('tea in the morning', '{\"scratch_id\": 1}') RETURNING id")
    await pool.execute("INSERT INTO consolidation_log (memory_id, operation, actor, alpha_before, beta_before, "
                       "alpha_after, beta_after) VALUES ($1, 'reinforce', 'retrieval', 1, 4, 1.04, 4)", mid)
    await pool.execute("INSERT INTO thought_log (cycle, source_tag, output) VALUES (1, 'internal_dmn', 'a thought')")
    reached = {a.key for a in await readiness(pool) if a.reached_at is not None}
    assert reached == {"memory_formation", "retrieval_success", "dmn_acted_upon"}
    assert format_readiness(await readiness(pool)).splitlines()[0] == "Readiness: 3/10 achievements"
