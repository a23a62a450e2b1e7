"""The exit gate on the user's own lines (issue 22 item 1): what share of facts is kept,
of chatter dropped, of questions left unstored — through the real gates.

    python -m bench user_facts
    python -m bench.bench_user_facts --embedder wordllama

The labelled set bench/data/utterances.jsonl (367 lines a user types: fact, chatter,
question; written apart from src/gates/utterance.py, split dev / report: the word
lists were adjusted on dev only) goes through the entry gate one line at a time
(`Gates.admit`, as the loop does: a short line may be skipped there) and one exit
flush, with the offline embedder (the configured one; `--embedder wordllama|minilm`), no language model, the shipped noise
floor (5%, seeded) and the shipped thresholds, into two stores:

- a mature store: 1,500 memories of other people's chat (bench/data/recall_memories.jsonl),
  past `agent.maturity_memories`, so there is no bootstrap floor;
- a young one: 100 of them.

Kept = persisted, or reinforcing / flagging the memory it confirms or contradicts.
Each line is flushed in its own focus (the loop notes the focus of the cycle that
attends to a line; here each line's own embedding, as the loop's winner embedding is).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from collections import Counter
from pathlib import Path

from bench.common import OFFLINE_EMBEDDERS, bench_pool, offline_embedder
from src.config import load_settings
from src.gates.memory_gate import Gates
from src.memory.jsonl import parse_line
from src.providers.embedding import embed_memories
from src.providers.llm_reflex import ReflexLanguageModel
from src.providers.protocols import Embedder
from src.recall.bulk_import import write_batch
from src.weights.safety import Safety

DATA = Path(__file__).parent / "data"
UTTERANCES = DATA / "utterances.jsonl"
CHAT = DATA / "recall_memories.jsonl"
KEPT = {"persist", "persist_flag", "reinforce"}


async def _one_store(size: int, rows: list[dict], embedder: Embedder) -> Counter:
    settings = load_settings()
    async with bench_pool(f"bench_user_facts_{size}") as pool:
        lines = CHAT.read_text(encoding="utf-8").splitlines()[:size]
        records = [parse_line(line, n) for n, line in enumerate(lines, start=1)]
        for start in range(0, len(records), 500):
            await write_batch(pool, embedder, records[start:start + 500], {})
        gates = Gates.build(pool, embedder, ReflexLanguageModel("no language model in the benchmark"),
                            settings.gates, Safety(), rng=random.Random(22))
        ids: dict[int, dict] = {}
        vecs = await embed_memories(embedder, [r["text"] for r in rows], ["episodic"] * len(rows))
        for r, vec in zip(rows, vecs, strict=True):
            admitted = await gates.admit(r["text"], exchange=False)
            if admitted.scratch_id is not None:
                ids[admitted.scratch_id] = r
                await gates.note_focus([admitted.scratch_id], vec[None, :])
        # the service flushes every few exchanges: an item the noise floor deferred to the
        # buffer comes back at the next flush (and persists at its last round)
        for _ in range(settings.gates.exit.max_buffer_rounds):
            await gates.exit.flush(reason="benchmark")
        decided = {d["scratch_id"]: d["action"] for d in await pool.fetch(
            "SELECT DISTINCT ON (scratch_id) scratch_id, action FROM gate_decisions "
            "WHERE gate = 'exit' ORDER BY scratch_id, id DESC")}
        lost = [(r["text"], decided.get(sid, "skipped at entry")) for sid, r in ids.items()
                if r["label"] == "fact" and decided.get(sid) not in KEPT]
        lost += [(r["text"], "skipped at entry") for r in rows
                 if r["label"] == "fact" and r not in ids.values()]
        for text, action in lost:
            print(f"  {size}: fact not kept ({action}): {text}", file=sys.stderr)
        out: Counter = Counter()
        for r in rows:
            out[(r["split"], r["label"], "n")] += 1
        for sid, r in ids.items():
            if decided.get(sid) in KEPT:
                out[(r["split"], r["label"], "kept")] += 1
        return out


async def run(embedder_name: str | None = None) -> list[dict]:
    rows = [json.loads(line) for line in UTTERANCES.read_text(encoding="utf-8").splitlines() if line.strip()]
    embedder = offline_embedder(embedder_name)
    out = []
    for size, name in ((1500, "mature (1,500)"), (100, "young (100)")):
        counts = await _one_store(size, rows, embedder)
        for split in ("dev", "report"):
            for label, what in (("fact", "kept"), ("chatter", "not kept"), ("question", "not kept")):
                n = counts[(split, label, "n")]
                kept = counts[(split, label, "kept")]
                share = kept / n if what == "kept" else 1 - kept / n
                out.append({"name": f"{name} {split}: {label} {what}", "value": round(100 * share, 1),
                            "unit": f"% of {n}"})
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_user_facts", description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", choices=OFFLINE_EMBEDDERS,
                        help="the offline embedder (default: providers.embeddings.offline's default)")
    for row in asyncio.run(run(parser.parse_args(argv).embedder)):
        print(f"{row['name']:<40} {row['value']:>6} {row['unit']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
