"""A spent background budget (issue 24) in a running mind: the DMN stops spending, internal
impulses are held back, the scheduled deep pass waits — and the user's turns still run.

The model is a scripted backend behind the production ResilientLanguageModel, so every call
is a real llm_calls row with its caller, and the budget counts what the ledger tells it.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import numpy as np

from src.config import load_settings
from src.db.manifest import record_start
from src.mind import build_mind
from src.providers.costs import CostLedger
from src.providers.endpoint_gate import EndpointGates
from src.providers.llm import LLMRequest, ResilientLanguageModel
from src.providers.protocols import LLMResult
from src.providers.resilience import CircuitBreaker, Resilience, RetryPolicy
from src.providers.settings import LLMSettings, ProvidersSettings
from src.recall.store import NewMemory
from tests.fakes import HashEmbedder
from tests.proc import agent_env, run_agent
from tests.providers.fakes import Sleeps

ANSWER = "Earl grey, every morning."


@dataclass
class LoopBackend:
    """LLMBackend fake: a confident answer, a feeling of knowing, a contradiction verdict."""

    provider: str = "scripted"
    model: str = "scripted-loop"
    requests: list[LLMRequest] = field(default_factory=list)

    async def complete(self, request: LLMRequest) -> LLMResult:
        self.requests.append(request)
        if not request.json_mode:       # the tea answer to the tea question (another would be a repeat)
            asked = request.messages[-1].content
            text = f"{ANSWER if 'tea' in asked else 'A quiet morning thought.'}\nConfidence: 0.95"
        elif "judgement" in (request.system or ""):
            text = json.dumps({"judgement": "KNOWN", "confidence": 0.9})
        else:
            assert "contradicts" in (request.system or ""), request.system
            text = json.dumps({"contradicts": False, "summary_a": "a statement"})
        return LLMResult(text, self.model, self.provider, 100, 10, 1.0)

    async def aclose(self) -> None:
        return None

    def saw(self, words: str) -> bool:
        return any(words in m.content for r in self.requests for m in r.messages)


async def _mind(pool, tmp_path, backend: LoopBackend, budget: dict):
    ledger = CostLedger(pool, session_id="budget", prices=ProvidersSettings().prices)
    llm = ResilientLanguageModel(
        backend, ledger=ledger, settings=LLMSettings(max_output_tokens=256, request_logprobs=False),
        resilience=Resilience(RetryPolicy(timeout_s=5, max_attempts=1), CircuitBreaker("scripted", 50, 30.0),
                              sleep=Sleeps(), rng=random.Random(1)))
    settings = load_settings(tmp_path / "none.yaml", env={}, overrides={
        "gates": {"seed": 1, "exit": {"noise_floor": 0.0}}, "budget": budget,
        "layers": {"values_path": str(tmp_path / "v.json"), "goals_path": str(tmp_path / "g.json"),
                   "cache_dir": str(tmp_path / "cache")}})
    providers = SimpleNamespace(endpoints=EndpointGates(), embedder=HashEmbedder(), reranker=None, system1=llm, system2=llm, meta=llm,
                                ledger=ledger)
    delivered: list[str] = []
    manifest = await record_start(pool, "budget", "fake-hash-768")
    mind = await build_mind(settings, pool, providers, session_id="budget", manifest=manifest,
                            deliver=delivered.append, rng=np.random.default_rng(3))
    return mind, delivered


async def _calls_by_caller(pool) -> dict[str | None, int]:
    return {r["caller"]: r["n"] for r in await pool.fetch("SELECT caller, count(*) AS n FROM llm_calls GROUP BY 1")}


async def test_a_spent_budget_stops_the_dmn_and_the_users_turns_still_run(pool, tmp_path):
    backend = LoopBackend()
    mind, delivered = await _mind(pool, tmp_path, backend, {"hourly_calls": 4, "idle_share": 0.5})
    for text in ("I walked along the river at dawn", "The blue bicycle is in the shed",
                 "We planted tomatoes in the garden"):
        await mind.store.store(NewMemory(text))
    now = datetime.now(UTC)

    first = await mind.dmn.tick(now)                     # idle, never spoken to: it produces
    assert first.produced and first.queued_item_id is not None
    record = await mind.loop.cycle(now)
    assert record is not None and record.winner.source == "dmn"
    spent = await _calls_by_caller(pool)
    assert spent.get("dmn", 0) >= 2 and None not in spent            # its cycle's calls are the DMN's
    assert mind.budget.left(now).idle_used == spent["dmn"]
    items = await pool.fetchval("SELECT count(*) FROM dmn_items")
    requests = len(backend.requests)

    second = await mind.dmn.tick(now + timedelta(seconds=30))
    assert not second.produced
    assert second.reason == (f"background budget spent (idle thought made {spent['dmn']} of its 2 calls "
                             "this hour)")
    assert await pool.fetchval("SELECT count(*) FROM dmn_items") == items
    assert mind.loop.queue.counts()["dmn"] == 0
    assert await mind.loop.submit_inner("gut", "something feels unsettled", now=now) is None   # held back
    assert len(backend.requests) == requests                 # nothing internal reached the model

    await mind.loop.submit("user", "What tea do I drink in the morning?", now=now)
    record = await mind.loop.cycle(now + timedelta(seconds=31))
    assert record.winner.source == "user"
    assert delivered[-1].startswith(ANSWER)
    assert backend.saw("What tea do I drink in the morning?")
    after = await _calls_by_caller(pool)
    assert after[None] >= 2 and after["dmn"] == spent["dmn"]        # the user's calls are nobody's budget
    assert mind.budget.refused == {"dmn": 1, "gut": 1}

    later = now + timedelta(minutes=61)                      # the DMN's calls left the hour
    assert mind.budget.allows("dmn", later)
    assert (await mind.dmn.tick(later)).produced
    await mind.close()


async def test_the_scheduled_deep_pass_waits_for_the_budget_and_gets_what_is_left(pool, tmp_path):
    backend = LoopBackend()
    mind, _ = await _mind(pool, tmp_path, backend, {"hourly_calls": 6, "idle_share": 0.5})
    consolidation = mind.consolidation
    consolidation._epoch = datetime.now(UTC) - timedelta(hours=2)        # the hourly timer is due
    now = datetime.now(UTC)

    class Rec:
        def __init__(self, caller):
            self.at, self.caller, self.cost_usd, self.purpose = now, caller, 0, "system1_answer"

    for caller in ("consolidation",) * 4 + ("dmn",) * 2:
        mind.budget.observe(Rec(caller))
    await consolidation._check_triggers()
    assert await pool.fetchval("SELECT count(*) FROM consolidation_passes") == 0    # waits; still due

    assert consolidation.budget is mind.budget
    mind.budget.settings = mind.budget.settings.model_copy(update={"hourly_calls": 10})
    await consolidation._check_triggers()                  # 4 calls left this hour: the pass gets 4, not 15
    row = await pool.fetchrow("SELECT trigger, llm_budget FROM consolidation_passes")
    assert (row["trigger"], row["llm_budget"]) == ("timer", 4)
    await mind.close()


def test_status_says_what_the_background_budget_has_left_and_how_the_dmn_is_paced(db_dsn, tmp_path):
    config = tmp_path / "runtime.yaml"
    config.write_text("budget:\n  hourly_calls: 12\n  daily_cost_usd: 0.5\n")
    result = run_agent(b"/status\n/quit\n", agent_env(DATABASE_URL=db_dsn), ("--config", str(config)))
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().splitlines()
    assert "background budget: 0 of 12 calls this hour (idle thought 0 of 6), $0.0000 of $0.50 in 24 h" in lines
    assert "DMN: due to tick (every 30 s while something new arrives)" in lines
