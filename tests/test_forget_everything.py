"""Issue 39's acceptance test: a secret said twice, consolidated by a deep pass whose model
cites it in an insight and a merge, the mind restarted, `forget --match` from the shell —
then no table of the database (every one the catalogue lists) and not the log file holds
a word of it, and the insight is gone or written again without it.

Real service processes for the conversation, the restart and the CLI; the deep pass runs
in this process on the service's own store and embedder, with a scripted model at the
provider seam (tests/consolidation_fakes.py) that cites the secret's memories.
"""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime

import asyncpg

from src.config import load_settings
from src.consolidation.deep.deep_pass import DEEP_PHASES, ConsolidationParts, run_deep_pass
from src.consolidation.settings import ConsolidationSettings
from src.providers.factory import build_providers
from src.weights.safety import Safety
from tests.consolidation_fakes import ConsolidationModel, ids_in, language_model
from tests.proc import agent_env, noiseless_config, run_agent, run_memory_cli

SECRET = "My gym locker code is zebrafish 7419, the blue locker by the pool."
AGAIN = "Remember that my gym locker code is zebrafish 7419 for the blue locker by the pool."
MARKS = ("zebrafish", "blue locker")
INSIGHT = "The user keeps a blue locker at the gym pool with the code zebrafish 7419."
MERGED = "The user's gym locker code is zebrafish 7419, the blue locker by the pool."
PHASES = [p for p in DEEP_PHASES if p.name in ("merge", "questions", "insights")]


async def tables_holding(conn: asyncpg.Connection, words: tuple[str, ...]) -> dict[str, int]:
    tables = [r["table_name"] for r in await conn.fetch(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
        "AND table_type = 'BASE TABLE' ORDER BY table_name")]
    assert len(tables) > 40
    found = {}
    for table in tables:
        n = await conn.fetchval(f'SELECT count(*) FROM "{table}" AS t WHERE t::text ILIKE ANY($1::text[])',
                                [f"%{w}%" for w in words])
        if n:
            found[table] = n
    return found


def _merge(request) -> str:
    clusters = re.findall(r"Cluster (\d+):((?:\n  \[\d+\].*)+)", request.messages[0].content)
    return json.dumps({"insights": [{"cluster": int(n), "insight": MERGED,
                                     "cited_ids": ids_in(body)} for n, body in clusters]})


def _insights(request) -> str:
    # cite the evidence lines that state the secret (a model reading them would)
    ids = [int(i) for i in re.findall(r"\[(\d+)\][^\n]*zebrafish", request.messages[0].content)]
    assert ids, request.messages[0].content
    return json.dumps({"insights": [{"insight": INSIGHT, "cited_ids": ids}]})


async def test_a_consolidated_secret_forgotten_from_the_shell_leaves_no_word(db_dsn, pool, tmp_path):
    log = tmp_path / "moltbot.log"
    # the noise floor would leave the typed secret in the buffer ~5% of runs: nothing to merge
    env = agent_env(DATABASE_URL=db_dsn, MOLTBOT_LOG_FILE=str(log), MOLTBOT_LOG_LEVEL="INFO",
                    MOLTBOT_CONFIG=str(noiseless_config(tmp_path)))
    said = f"{SECRET}\nMy sister lives in Porto.\n{AGAIN}\nWhat is my locker code?\n/quit\n".encode()
    first = run_agent(said, env, timeout=120)
    assert first.returncode == 0, first.stderr.decode()
    # said once more, a week earlier, in a conversation the guardian imports: the typed line
    # and the imported one are two memories the deep pass merges
    earlier = tmp_path / "earlier.jsonl"
    # with two more lines of the user's: the questions read the user's own memories (at least 3),
    # and which typed lines the exit gate kept by the time of the pass may vary
    earlier.write_text("".join(json.dumps({"content": text, "source_tag": "external_user",
                                           "event_time": "2026-11-20T10:00:00+00:00"}) + "\n"
                               for text in (SECRET, "I water the ficus on Mondays.",
                                            "I cycle to work along the canal.")), encoding="utf-8")
    imported = run_memory_cli(("import", str(earlier)), env)
    assert imported.returncode == 0, imported.stderr.decode()

    # the deep pass, on the service's store with the service's own embedder
    settings = load_settings(None, env={"DATABASE_URL": db_dsn})
    providers = None
    try:
        providers = build_providers(settings.providers, settings.secrets, pool, "test-deep")
        model = ConsolidationModel().push("merge", _merge).push(
            "questions", json.dumps({"questions": ["What does the user keep at the gym?"]})).push("insights", _insights)
        report = await run_deep_pass(
            ConsolidationParts(pool, embedder=providers.embedder, llm=language_model(model, pool), safety=Safety(),
                               settings=ConsolidationSettings()),
            trigger="manual", now=datetime.now(UTC), rng=random.Random(7), phases=PHASES)
        assert report.status == "done", report.error
        derived = await pool.fetch("SELECT s.via, m.id FROM memory_supersedes s JOIN memories m ON m.id = s.insight_id "
                                   "WHERE m.content ILIKE '%zebrafish%'")
        assert {r["via"] for r in derived} == {"insight", "merge"}, (derived, report.phases)
    finally:
        if providers is not None:
            await providers.aclose()

    second = run_agent(b"My brother is called Tomas.\n/quit\n", env, timeout=120)    # the restart
    assert second.returncode == 0, second.stderr.decode()
    conn = await asyncpg.connect(db_dsn)
    try:   # what there is to forget: the words in the store, the journal, the logs
        before = await tables_holding(conn, MARKS)
    finally:
        await conn.close()
    assert {"memories", "input_journal", "thought_log", "gate_decisions", "consolidation_units"} <= set(before), before
    cli = run_memory_cli(("forget", "--match", "zebrafish", "--yes"), env)
    out = cli.stdout.decode()
    assert cli.returncode == 0, cli.stderr.decode()
    assert "Forget these" not in out and "forgot " in out and "receipt #1 (cli," in out

    conn = await asyncpg.connect(db_dsn)
    try:
        assert await tables_holding(conn, MARKS) == {}
        assert await conn.fetchval("SELECT count(*) FROM memories WHERE content = $1", INSIGHT) == 0
        assert await conn.fetchval("SELECT count(*) FROM memories WHERE content ILIKE '%Porto%'") >= 1
        counts = json.loads(await conn.fetchval("SELECT counts FROM forget_receipts"))
        assert counts["memories"]["deleted"] >= 3          # the two statements and the insight
    finally:
        await conn.close()
    text = log.read_text(encoding="utf-8")
    assert "forget (cli)" in text or "INFO" in text
    assert not any(w in text.lower() for w in MARKS), [ln for ln in text.splitlines() if "zebrafish" in ln.lower()]
