"""What is current (issue 37 items 3-4): a fact stated, later changed — which comes back first?

    python -m bench updates                    # part of `make bench`

The labelled set bench/data/updates.jsonl: 147 pairs of first-person statements typed at two
times (older, newer, days between), labelled update / distinct / contradiction / unrelated,
with a question for the current value and one for the earlier (written by a helper that saw
no code; split dev / report). The store: 1,500 turns of other people's chat imported as the
CLI imports them (bench_paraphrase.other_peoples_chat), then every pair's two statements as
the user's own memories, each stored at its time (the newer `days_between` days after the
older; the newest an hour before the questions).

Asked through the read-only recall pipeline (`search`'s path, no reranker, 3 seeds):
- update pairs: the newer statement in the top 5 for the question about now, ranked above
  the older; the older in the top 5 for the question about before;
- distinct pairs: each statement in the top 5 for its own question (neither may crowd the
  other out).
The rows are the baseline for issue 37's update links (item 3: targets on the report half,
newer above older ≥ 95%).
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import numpy as np

from bench.bench_paraphrase import SEEDS, SPLITS, import_lines, other_peoples_chat
from bench.common import bench_pool
from src.config import load_settings
from src.providers.factory import build_providers
from src.recall.retrieval import Cue, Retriever
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety

DATA = Path(__file__).parent / "data" / "updates.jsonl"
TOP = 5


def _pairs() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]


async def _store_pairs(pool, embedder, pairs: list[dict]) -> None:
    """Both statements of every pair as the user's memories, each at its own time."""
    store = MemoryStore(pool, embedder)
    ids = await store.store_many([NewMemory(text, "episodic", source_tag="external_user")
                                  for p in pairs for text in (p["older"], p["newer"])])
    newest = await pool.fetchval("SELECT now()") - timedelta(hours=1)
    times = []
    for p in pairs:
        times += [newest - timedelta(days=int(p["days_between"])), newest]
    await pool.execute("UPDATE memories m SET created_at = t.at FROM unnest($1::bigint[], $2::timestamptz[]) "
                       "AS t(id, at) WHERE m.id = t.id", ids, times)


async def _ranked(retriever: Retriever, embedder, questions: list[str], now, seed: int) -> list[list[str]]:
    vecs = await embedder.embed(questions, "RETRIEVAL_QUERY")
    rng = np.random.default_rng(seed)
    out = []
    for q, v in zip(questions, vecs, strict=True):
        r = await retriever.retrieve(Cue(q, vec=v), rng=rng, now=now, mutate=False)
        out.append([m.hit.content for m in r.memories])
    return out


def _rank(ranked: list[str], text: str) -> int:
    return ranked.index(text) + 1 if text in ranked else 10_000


async def run(config: str | None = None) -> list[dict]:
    settings = load_settings(config, env={})
    providers = build_providers(settings.providers, settings.secrets, None, None)
    embedder = providers.embedder
    pairs = [p for p in _pairs() if p["label"] in ("update", "distinct")]
    what, lines = other_peoples_chat()
    cfg = settings.recall.retrieval.model_copy(update={"keep": 20, "limit": max(settings.recall.retrieval.limit, 20)})
    rows: list[dict] = []
    try:
        async with bench_pool("bench_updates") as pool:
            await import_lines(pool, embedder, lines)
            await _store_pairs(pool, embedder, pairs)
            now = await pool.fetchval("SELECT max(created_at) FROM memories") + timedelta(hours=1)
            retriever = Retriever(pool, embedder, None, Safety(), cfg)
            rows.append({"name": f"store: {len(lines)} turns of {what} + {len(pairs)} pairs ({embedder.model_name})",
                         "value": await pool.fetchval("SELECT count(*) FROM memories"), "unit": "memories"})
            now_q = [await _ranked(retriever, embedder, [p["question_now"] for p in pairs], now, s) for s in SEEDS]
            before_q = [await _ranked(retriever, embedder, [p["question_before"] for p in pairs], now, s)
                        for s in SEEDS]
            for split in SPLITS:
                for label in ("update", "distinct"):
                    picked = [i for i, p in enumerate(pairs) if p["split"] == split and p["label"] == label]
                    if not picked:
                        continue

                    def share(test, picked=picked) -> float:
                        return 100.0 * float(np.mean([test(i, s) for s in range(len(SEEDS)) for i in picked]))

                    newer_top = share(lambda i, s: _rank(now_q[s][i], pairs[i]["newer"]) <= TOP)
                    older_top = share(lambda i, s: _rank(before_q[s][i], pairs[i]["older"]) <= TOP)
                    rows += [{"name": f"{split}: {label} ({len(picked)}): newer in the top {TOP} asked about now",
                              "value": newer_top, "unit": "%"},
                             {"name": f"{split}: {label} ({len(picked)}): older in the top {TOP} asked about before",
                              "value": older_top, "unit": "%"}]
                    if label == "update":
                        above = share(lambda i, s: _rank(now_q[s][i], pairs[i]["newer"])
                                      < _rank(now_q[s][i], pairs[i]["older"]))
                        rows.append({"name": f"{split}: update ({len(picked)}): newer ranked above older asked about now",
                                     "value": above, "unit": "%"})
    finally:
        await providers.aclose()
    return rows


if __name__ == "__main__":
    import asyncio

    for row in asyncio.run(run()):
        print(f"{row['name']}: {row['value']:.1f} {row['unit']}")
