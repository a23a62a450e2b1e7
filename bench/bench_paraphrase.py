"""Facts asked for in other words (issue 35 item 2): typed through the real gates into a
store of other people's chat, then found by `search` with a question that shares no content
word with them.

    python -m bench paraphrase                 # part of `make bench`
    python -m bench.bench_paraphrase --tune    # the dev half under variants of recall's knobs
    python -m bench.bench_paraphrase [--tune] --config FILE    # with another runtime.yaml

The labelled set bench/data/paraphrase_facts.jsonl: 200 personal facts a user types (work,
people, family, pets, health, home, places, travel, plans, tastes, hobbies, money, routine,
education, possessions), each with the question a person would ask about it later, sharing
no content word with it (written apart from the retrieval code, checked by its author for
shared words and stems; split dev / report by id, odd / even). Knobs are chosen on `dev`;
`report` is the result.

The store: 1,500 turns of other people's chat imported as the CLI imports them (speakers,
conversations, so each turn carries its context) — REALTALK's tune conversations
(bench/data/README.md) when present, else the synthetic set's turns with their speakers
renamed (bench/data/recall_memories.jsonl; "user" → Sam, "agent" → Alex: other people).
Then the 200 facts one at a time through `Gates.admit` and the exit gate's flushes, each in
its own focus (as bench_user_facts), with the offline embedder, no language model and the
shipped noise floor (seeded). A fact the gates did not keep cannot be found (counted).

Asked: every question through `python -m src.memory search --k 20`'s path (read-only
Retriever, 3 seeds) and each arm alone; hit@k = the fact's own memory in the top k.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path

import asyncpg
import numpy as np

from bench.common import bench_pool
from src.config import Settings, load_settings
from src.gates.memory_gate import Gates
from src.memory.jsonl import parse_line
from src.providers.embedding import embed_memories
from src.providers.factory import build_providers
from src.providers.llm_reflex import ReflexLanguageModel
from src.providers.protocols import Embedder
from src.recall.bulk_import import write_batch
from src.recall.conversation import Threads, follow_record
from src.recall.retrieval import Cue, Retriever
from src.recall.scoring import asks_of_user
from src.recall.search import search_hybrid
from src.recall.settings import ArmWeights, RetrievalSettings
from src.weights.safety import Safety

DATA = Path(__file__).parent / "data"
FACTS = DATA / "paraphrase_facts.jsonl"
REALTALK = DATA / "realconv_turns.jsonl"
REALTALK_QUESTIONS = DATA / "realconv_questions.jsonl"
SYNTHETIC = DATA / "recall_memories.jsonl"
STORE_SIZE = 1500
KS = (5, 10, 20)
SEEDS = (12, 13, 14)
SPLITS = ("dev", "report")
RENAMED = {"user": "Sam", "agent": "Alex"}
#: --tune: arm settings (w_vector, w_recency, rrf_k) to compare; the real conversations'
#: tune half cannot tell them apart for MiniLM (bench_realconv --tune, notes.md).
GRID_ARMS = ((0.25, 0.0, 60), (0.5, 0.05, 30), (0.75, 0.1, 30), (1.0, 0.1, 30), (1.0, 0.05, 60), (1.5, 0.1, 30))


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def other_peoples_chat(size: int = STORE_SIZE) -> tuple[str, list[str]]:
    """(what it is, import lines): REALTALK's tune conversations when present, else the
    synthetic turns with their speakers renamed."""
    if REALTALK.exists() and REALTALK_QUESTIONS.exists():
        tune = {q["conv"] for q in _jsonl(REALTALK_QUESTIONS) if q["split"] == "tune"}
        turns = [t for t in _jsonl(REALTALK) if t["conv"] in tune][:size]
        return "REALTALK tune conversations", [json.dumps({
            "content": t["text"], "event_time": t["time"], "source_tag": "external_user",
            "conversation": f"{t['conv']}/{t['session']}", "metadata": {"speaker": t["speaker"]}})
            for t in turns]
    lines = []
    for row in _jsonl(SYNTHETIC)[:size]:
        row["source_tag"] = "external_user"
        row["metadata"]["speaker"] = RENAMED.get(row["metadata"].get("speaker"), "Sam")
        lines.append(json.dumps(row))
    return "synthetic turns, speakers renamed", lines


async def import_lines(pool: asyncpg.Pool, embedder: Embedder, lines: Sequence[str]) -> None:
    """As `python -m src.memory import` stores them: conversation context included."""
    threads = Threads()
    records = [follow_record(threads, parse_line(line, n)) for n, line in enumerate(lines, start=1)]
    for start in range(0, len(records), 500):
        await write_batch(pool, embedder, records[start:start + 500], {})


async def type_facts(pool: asyncpg.Pool, embedder: Embedder, settings: Settings, facts: Sequence[str]) -> int:
    """The facts one at a time through the real gates, each flushed in its own focus; how many
    became memories."""
    gates = Gates.build(pool, embedder, ReflexLanguageModel("no language model in the benchmark"),
                        settings.gates, Safety(), rng=random.Random(35))
    vecs = await embed_memories(embedder, list(facts), ["episodic"] * len(facts))
    for text, vec in zip(facts, vecs, strict=True):
        admitted = await gates.admit(text, exchange=False)
        if admitted.scratch_id is not None:
            await gates.note_focus([admitted.scratch_id], vec[None, :])
    for _ in range(settings.gates.exit.max_buffer_rounds):
        await gates.exit.flush(reason="benchmark")
    return await pool.fetchval("SELECT count(*) FROM memories WHERE content = ANY($1::text[])", list(facts))


Ranked = list[list[str]]


class Asked:
    """The store with its facts, and the questions asked of it."""

    def __init__(self, pool: asyncpg.Pool, embedder: Embedder, items: list[dict]):
        self.pool, self.embedder, self.items = pool, embedder, items
        self.vectors: list[np.ndarray] = []
        self.now: datetime | None = None

    async def prepare(self) -> None:
        """The questions' vectors; `now` an hour after the last memory was stored (asked after a
        restart, not seconds after typing: ACT-R's ages, and so the result, do not depend on
        how fast the machine ran the bench)."""
        self.vectors = list(await self.embedder.embed([i["question"] for i in self.items], "RETRIEVAL_QUERY"))
        self.now = await self.pool.fetchval("SELECT max(created_at) FROM memories") + timedelta(hours=1)

    async def hybrid(self, arms: ArmWeights, k: float, cfg: RetrievalSettings, vector: bool = True) -> Ranked:
        out = []
        for item, vec in zip(self.items, self.vectors, strict=True):
            hits = await search_hybrid(self.pool, item["question"], vec if vector else None,
                                       embed_model=self.embedder.model_name, limit=20, k=k,
                                       w_vector=arms.w_vector, w_fulltext=arms.w_fulltext, w_recency=arms.w_recency,
                                       candidates=cfg.candidates, w_context=cfg.context_weight,
                                       fts_confidence=arms.fts_confidence,
                                       w_own=arms.w_own if asks_of_user(item["question"]) else 0.0, now=self.now)
            out.append([h.content for h in hits])
        return out

    async def pipeline(self, cfg: RetrievalSettings, seed: int) -> Ranked:
        cfg = cfg.model_copy(update={"keep": 20, "limit": max(cfg.limit, 20)})
        retriever = Retriever(self.pool, self.embedder, None, Safety(), cfg)
        rng = np.random.default_rng(seed)
        out = []
        for item, vec in zip(self.items, self.vectors, strict=True):
            r = await retriever.retrieve(Cue(item["question"], vec=vec), rng=rng, now=self.now, mutate=False)
            out.append([m.hit.content for m in r.memories])
        return out

    def hits(self, ranked: Ranked, k: int, split: str) -> float:
        found = [i["fact"] in r[:k] for i, r in zip(self.items, ranked, strict=True) if i["split"] == split]
        return 100.0 * float(np.mean(found))


async def _rows(asked: Asked, label: str, runs: Sequence[Callable[[], Awaitable[Ranked]]]) -> list[dict]:
    ranked = [await run() for run in runs]
    return [{"name": f"{split}: {label}: in the top {k}",
             "value": float(np.mean([asked.hits(r, k, split) for r in ranked])), "unit": "%"}
            for split in SPLITS for k in KS]


async def open_store(settings: Settings, embedder: Embedder, items: list[dict], name: str):
    """A bench database with the chat imported and the facts typed; (pool cm, what, kept)."""
    what, lines = other_peoples_chat()
    cm = bench_pool(name)
    pool = await cm.__aenter__()
    await import_lines(pool, embedder, lines)
    kept = await type_facts(pool, embedder, settings, [i["fact"] for i in items])
    return cm, pool, what, kept


async def run(config: str | None = None) -> list[dict]:
    """The report's rows; `config`: a runtime.yaml other than ./runtime.yaml."""
    settings = load_settings(config, env={})
    providers = build_providers(settings.providers, settings.secrets, None, None)
    embedder, cfg = providers.embedder, settings.recall.retrieval
    arms, k = cfg.arm_weights(embedder.model_name), cfg.rrf_k_for(embedder.model_name)
    items = _jsonl(FACTS)
    cm, pool, what, kept = await open_store(settings, embedder, items, "bench_paraphrase")
    try:
        asked = Asked(pool, embedder, items)
        await asked.prepare()
        rows = [{"name": f"store: {STORE_SIZE} turns of {what} + facts typed ({embedder.model_name})",
                 "value": await pool.fetchval("SELECT count(*) FROM memories"), "unit": "memories"},
                {"name": "facts kept by the gates", "value": kept, "unit": f"of {len(items)}"}]
        rows += await _rows(asked, "vector arm alone", [lambda: asked.hybrid(
            ArmWeights(w_vector=1, w_fulltext=0, w_recency=0), k, cfg)])
        rows += await _rows(asked, "full-text arm alone", [lambda: asked.hybrid(
            ArmWeights(w_vector=0, w_fulltext=1, w_recency=0), k, cfg, vector=False)])
        rows += await _rows(asked, "bare hybrid", [lambda: asked.hybrid(arms, k, cfg)])
        rows += await _rows(asked, "pipeline (mean of 3 seeds)",
                            [lambda seed=seed: asked.pipeline(cfg, seed) for seed in SEEDS])
    finally:
        await cm.__aexit__(None, None, None)
        await providers.aclose()
    return rows


async def tune(config: str | None = None) -> None:
    """The dev half under variants of the knobs this set bears on; report is not printed."""
    settings = load_settings(config, env={})
    providers = build_providers(settings.providers, settings.secrets, None, None)
    embedder, base = providers.embedder, settings.recall.retrieval
    items = _jsonl(FACTS)
    cm, pool, what, kept = await open_store(settings, embedder, items, "bench_paraphrase_tune")
    try:
        asked = Asked(pool, embedder, items)
        await asked.prepare()
        print(f"{what}; facts kept {kept} of {len(items)}")
        model = embedder.model_name
        arms = base.arm_weights(model)
        variants = [("configured", {})] + [(f"w_own {w:g}", {"arms": {**base.arms, model: arms.model_copy(
            update={"w_own": w})}}) for w in (0.0, 0.25, 0.5, 1.0)] + [
            (f"user_word {w:g}", {"user_word": w}) for w in (0.0, 0.05, 0.2, 0.3)] + [
            (f"activation_share {a:g}", {"activation_share": a}) for a in (0.0, 0.15)] + [
            (f"arms {wv:g}/{wr:g}/{k:g}", {"arms": {**base.arms, model: ArmWeights(
                w_vector=wv, w_fulltext=1.0, w_recency=wr, rrf_k=k)}}) for wv, wr, k in GRID_ARMS]
        for label, update in variants:
            cfg = base.model_copy(update=update)
            ranked = [await asked.pipeline(cfg, seed) for seed in SEEDS]
            cells = "  ".join(f"@{k} {np.mean([asked.hits(r, k, 'dev') for r in ranked]):5.1f}" for k in KS)
            print(f"dev pipeline {label:<24} {cells}", flush=True)
    finally:
        await cm.__aexit__(None, None, None)
        await providers.aclose()


if __name__ == "__main__":
    config = sys.argv[sys.argv.index("--config") + 1] if "--config" in sys.argv else None
    if "--tune" in sys.argv:
        asyncio.run(tune(config))
    else:
        for row in asyncio.run(run(config)):
            print(f"{row['name']}: {row['value']:.1f} {row['unit']}")
