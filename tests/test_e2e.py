"""End to end: `python -m src.main` in reflex mode, a 20-message conversation piped in,
then the operator's view — SQL on the tables, /cost and /readiness parsed."""

from __future__ import annotations

import re

import asyncpg

from tests.proc import agent_env, noiseless_config, run_agent

CONVERSATION = [
    "Hi, I'm Ana and I just moved to Porto for a new job",
    "I work as a marine biologist studying octopus behaviour",
    "My favourite food here is francesinha, though it is heavy",
    "I drink earl grey tea every morning before work",
    "My sister Marta lives in Lisbon with her two cats",
    "I am learning Portuguese but the pronunciation is hard",
    "On weekends I like to surf at Matosinhos beach",
    "What do you remember about my job?",
    "I am worried about a presentation to the research board next week",
    "The octopus named Olga escaped her tank again yesterday",
    "ok",
    "I prefer cycling to work instead of taking the metro",
    "My grandmother taught me to bake bread when I was seven",
    "Do you remember what I drink in the morning?",
    "I'm reading a novel by Saramago, Blindness",
    "The presentation is about how octopuses solve puzzles",
    "I feel calmer after surfing, the cold water helps",
    "Marta is visiting Porto next month",
    "What is my sister's name?",
    "Thanks for listening, talk tomorrow",
]


async def test_twenty_message_conversation_leaves_an_inspectable_mind(db_dsn, tmp_path):
    stdin = ("\n".join(CONVERSATION) + "\n/cost\n/readiness\n").encode()
    # The shipped runtime.yaml without the exit gate's noise floor: a noise draw at the
    # shutdown flush would leave an item buffered (unflushed) and fail the check below
    # that the buffer is empty, in a run whose RNG the test cannot fix.
    config = noiseless_config(tmp_path)
    result = run_agent(stdin, agent_env(DATABASE_URL=db_dsn), ("--config", str(config)), timeout=180)
    out, err = result.stdout.decode(), result.stderr.decode()
    assert result.returncode == 0, err
    assert "Traceback" not in err

    # /cost in reflex mode: nothing paid
    assert "No language-model calls recorded yet." in out
    # /readiness: the header and ten lines
    match = re.search(r"^Readiness: (\d+)/10 achievements$", out, re.M)
    assert match is not None
    assert len(re.findall(r"^ \[[ x]\] +\d+\. ", out, re.M)) == 10
    conn = await asyncpg.connect(db_dsn)
    try:
        cycles = await conn.fetch("SELECT cycle, source_tag, attention_focus, output FROM thought_log ORDER BY id")
        # every message got an answer — alone, or in a turn that took waiting messages together —
        # and reflex mode says so plainly, once per reply
        assert out.count("(reflex mode — no language model is configured") == len(cycles)
        assert [r["cycle"] for r in cycles] == list(range(1, len(cycles) + 1))   # one row per cycle
        assert {r["source_tag"] for r in cycles} == {"external_user"}
        focus = "\n".join(r["attention_focus"] for r in cycles)
        assert [m for m in CONVERSATION if m not in focus] == []
        combined = [r for r in cycles if r["attention_focus"].startswith("[")]
        assert out.count(" messages together: ") == len(combined)
        assert sum(r["attention_focus"].count("\n") for r in combined) + len(cycles) - len(combined) == 20
        kept = await conn.fetchval("SELECT count(*) FROM memories WHERE source_tag = 'external_user'")
        assert kept >= 15                       # the permissive newborn gate keeps what the user says
        assert await conn.fetchval("SELECT count(*) FROM scratch_buffer WHERE flushed_at IS NULL") == 0
        # later turns bring back what earlier turns said: from the store once the flush has
        # written it, from working memory (the unflushed scratch) until then — which of the
        # two depends on how far the background flush got while the burst was answered
        recalled = await conn.fetchval("SELECT count(*) FROM consolidation_log WHERE actor = 'retrieval'")
        said_before = [[m for m in CONVERSATION if m in "\n".join(r["attention_focus"] for r in cycles[:i])]
                       for i in range(len(cycles))]
        brought_back = [m for i, r in enumerate(cycles) for m in said_before[i] if f"  - {m}" in r["output"]]
        assert recalled > 0 or brought_back, [r["output"] for r in cycles]
        decisions = await conn.fetchval("SELECT count(*) FROM gate_decisions")
        assert decisions >= 20
    finally:
        await conn.close()
