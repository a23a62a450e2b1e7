"""Issue 40 item 3: the light ticker's contradiction findings are consumed, shown, and its
model calls stay inside their share of the background budget."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

from src.consolidation.clustering import fingerprint
from src.consolidation.deep.deep_pass import DEEP_PHASES, ConsolidationParts, run_deep_pass
from src.consolidation.light import findings_repository
from src.consolidation.light.ticker import LightTicker
from src.consolidation.settings import ConsolidationSettings
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.consolidation_fakes import ConsolidationModel, language_model
from tests.fakes import HashEmbedder
from tests.test_web_pages import _text, served

RECONSOLIDATION_ONLY = [p for p in DEEP_PHASES if p.name == "reconsolidation"]
COFFEE = ["I really love strong black coffee every single morning",
          "I do not love strong black coffee every single morning"]


async def _finding(pool) -> tuple[list[int], int]:
    ids = await MemoryStore(pool, HashEmbedder()).store_many([NewMemory(t) for t in COFFEE])
    await findings_repository.insert_finding(pool, "contradiction", fingerprint(ids), sorted(ids),
                                             {"layer": "negation", "similarity": 0.93, "opposition": None})
    return ids, await pool.fetchval("SELECT id FROM consolidation_findings")


async def test_the_next_deep_pass_consumes_a_contradiction_finding_and_the_page_shows_it(pool):
    ids, finding = await _finding(pool)
    backend = ConsolidationModel()
    report = await run_deep_pass(ConsolidationParts(pool, embedder=HashEmbedder(), llm=language_model(backend, pool),
                                                    safety=Safety(), settings=ConsolidationSettings()),
                                 trigger="manual", now=datetime.now(UTC), rng=random.Random(7),
                                 phases=RECONSOLIDATION_ONLY)
    assert report.status == "done", report.error
    assert backend.kinds() == ["reconsolidation"]
    asked = backend.requests[0].messages[0].content
    assert COFFEE[0] in asked and COFFEE[1] in asked
    row = await pool.fetchrow("SELECT consumed_at, consumed_pass, outcome FROM consolidation_findings")
    assert row["consumed_at"] is not None and row["outcome"] == "productive_contradiction"
    assert await pool.fetchval("SELECT count(*) FROM productive_contradictions WHERE insight_id = $1 "
                               "AND memory_id = $2", ids[0], ids[1]) == 1

    again = ConsolidationModel()                      # consumed: the next pass does not ask it again
    await run_deep_pass(ConsolidationParts(pool, embedder=HashEmbedder(), llm=language_model(again, pool),
                                           safety=Safety(), settings=ConsolidationSettings()),
                        trigger="manual", now=datetime.now(UTC), rng=random.Random(7),
                        phases=RECONSOLIDATION_ONLY)
    assert again.kinds() == []

    async with served(pool) as (s, url):
        status, html = await _text(s, f"{url}/consolidation")
    assert status == 200
    assert "Contradictions the light ticker found" in html
    assert f'href="/memories/{ids[0]}"' in html and "productive_contradiction" in html


async def test_the_contradiction_scans_model_calls_stop_at_their_hourly_share(pool):
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many([NewMemory("the office printer on floor three jams every monday"),
                                                  NewMemory("the office printer on floor three works every monday")])
    backend = ConsolidationModel()
    backend.kind_of = staticmethod(lambda request: "contradiction")
    answer = json.dumps({"contradicts": False, "summary_a": "printer"})
    backend.push("contradiction", *[answer] * 20)
    settings = ConsolidationSettings(light={"contradiction_samples": 20, "contradiction_llm_pairs": 1,
                                            "contradiction_llm_per_hour": 2, "contradiction_interval_s": 0,
                                            "pattern_interval_s": 1e9})
    start = datetime.now(UTC)
    t = LightTicker(pool, embedder=embedder, llm=language_model(backend, pool), safety=Safety(),
                    settings=settings, rng=random.Random(3), clock=lambda: start)
    t.last_run["pattern"] = start
    for minutes in (0, 10, 20, 30, 40):              # one scan every ten minutes, one call a scan at most
        await t.tick(start + timedelta(minutes=minutes))
    assert len(backend.requests) == 2                 # the hour's share, not five
    await t.tick(start + timedelta(minutes=61))       # the first call left the hour's window
    assert len(backend.requests) == 3
