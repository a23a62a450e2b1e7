"""The full-text arm's common-rows cap (issue 24): recall and cost with and without it.

    python -m bench fulltext_cap            # ~3 min; needs bench/data/realconv_*.jsonl

All ten REALTALK conversations (bench/data/README.md) in one store — 8,944 turns, where
everyday words pass the df cap of 1,000 rows — and the same turns repeated 10 times
(89,440 rows, each copy standing for its turn). Every question (706) is asked of the
full-text arm alone (the hybrid statement with the vector arm off, recency 0), once with
COMMON_ROWS_CAP and once with no cap; evidence recall@10 (a copy counts for its turn)
and the statement's p50/p95 latency are reported. No embedder is needed: rows are
written with SQL and carry no vector.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.common import bench_pool
from src.recall.search import COMMON_ROWS_CAP, HYBRID_SQL, hybrid_arguments

DATA = Path(__file__).parent / "data"
NO_CAP = 1_000_000_000


def _read(name: str) -> list[dict]:
    with (DATA / name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


async def _ask(pool, questions: Sequence[dict], turn_of: dict[int, str], cap: int) -> tuple[float, list[float]]:
    """Mean evidence recall@10 and per-question milliseconds, full-text arm alone."""
    recalls, ms = [], []
    for q in questions:
        args = list(hybrid_arguments(q["question"], None, embed_model="none", limit=10, k=30,
                                     w_vector=0.0, w_fulltext=1.0, w_recency=0.0, candidates=50))
        args[11] = cap
        started = time.perf_counter()
        rows = await pool.fetch(HYBRID_SQL, *args)
        ms.append((time.perf_counter() - started) * 1000)
        found = {turn_of[r["id"]] for r in rows}
        recalls.append(len(found & set(q["evidence"])) / len(q["evidence"]))
    return float(np.mean(recalls)), ms


async def _measure(copies: int, turns: list[dict], questions: list[dict]) -> list[dict]:
    async with bench_pool(f"ftcap{copies}") as pool:
        await pool.execute(
            """INSERT INTO memories (content, metadata)
               SELECT t.content || CASE WHEN c > 1 THEN ' (' || c || ')' ELSE '' END,
                      jsonb_build_object('turn', t.turn)
                 FROM unnest($1::text[], $2::text[]) AS t(content, turn), generate_series(1, $3) c""",
            [f"{t['speaker']}: {t['text']}" for t in turns], [t["turn"] for t in turns], copies)
        await pool.execute("ANALYZE memories")
        turn_of = {r["id"]: r["turn"] for r in await pool.fetch("SELECT id, metadata->>'turn' AS turn FROM memories")}
        out = []
        for label, cap in (("capped", COMMON_ROWS_CAP), ("uncapped", NO_CAP)):
            await _ask(pool, questions[:20], turn_of, cap)                    # warm the cache
            recall, ms = await _ask(pool, questions, turn_of, cap)
            out.append({"rows": len(turn_of), "cap": label, "recall@10": round(100 * recall, 1),
                        "p50_ms": round(float(np.percentile(ms, 50)), 1),
                        "p95_ms": round(float(np.percentile(ms, 95)), 1)})
            print(out[-1], flush=True)
        return out


async def run() -> list[dict]:
    if not (DATA / "realconv_turns.jsonl").exists():
        print("fulltext_cap: bench/data/realconv_*.jsonl missing (bench/data/README.md says how to "
              "rebuild them); skipped", file=sys.stderr)
        return []
    turns, questions = _read("realconv_turns.jsonl"), _read("realconv_questions.jsonl")
    rows = []
    for copies in (1, 10):
        for m in await _measure(copies, turns, questions):
            label = f"{m['rows']:,} rows, {m['cap']}"
            rows += [{"name": f"{label}: full-text recall@10", "value": m["recall@10"], "unit": "%"},
                     {"name": f"{label}: p50", "value": m["p50_ms"], "unit": "ms"},
                     {"name": f"{label}: p95", "value": m["p95_ms"], "unit": "ms"}]
    return rows


if __name__ == "__main__":
    asyncio.run(run())
