"""Gates: throughput of entry + exit gate into the store at 100k memories, and how many
decisions would need the LLM micro-call on a mixed set.

    python -m bench gates

Runs in its own database on the embedded test server (data/test-pg, fsync off),
dropped at the end, with the real offline embedder (wordllama) and no language
model (reflex mode), so no LLM call is made: a pair that layers 1 and 2 leave
undecided is recorded as `llm_skipped`, which is exactly "would have needed the
micro-call".

- 100,000 memories: synthetic sentences from a Zipf vocabulary, embedded with
  wordllama, loaded with `store_many` before the HNSW index is built;
- 2,000 new items: entry gate one by one (`Gates.admit`), then flushed in chunks
  of 100 (one embed call, 100 novelty queries, one transaction each); items/s for
  entry, exit, and both (the one-off costs, learning the negation direction and
  the store centroid, are measured apart);
- a mixed set of 400 items against 200 stored plain statements: restatements,
  explicit negations, antonym swaps (100 each), and 100 news items unrelated to the
  statements (10 sentences × 10 time phrases, so they confirm one another); the
  share of decisions that needed layer 3, and what layers 1-2 concluded, by kind.
"""

from __future__ import annotations

import json
import random
import time

import numpy as np

from bench.common import bench_pool, build_hnsw
from src.gates.memory_gate import Gates
from src.gates.settings import GateSettings
from src.providers.embed_wordllama import WordLlamaEmbedder
from src.providers.llm_reflex import ReflexLanguageModel
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety

NAMES = ["my sister", "my brother", "my neighbour", "our manager", "the new intern", "my cousin",
         "the landlord", "my best friend", "the doctor", "our teacher"]
# (statement verb, its base form for "does not …", an antonym, object)
FACTS = [("likes", "like", "dislikes", "spicy food"), ("lives in", "live in", "moved out of", "Lisbon"),
         ("trusts", "trust", "distrusts", "the bank"), ("enjoys", "enjoy", "hates", "long meetings"),
         ("remembers", "remember", "forgot", "the password"),
         ("accepted", "accept", "rejected", "the offer"),
         ("won", "win", "lost", "the chess tournament"),
         ("supports", "support", "opposes", "the new plan"), ("bought", "buy", "sold", "the old car"),
         ("passed", "pass", "failed", "the driving test"), ("loves", "love", "hates", "the winter"),
         ("found", "find", "lost", "the house keys"),
         ("agrees with", "agree with", "disagrees with", "the decision"),
         ("opened", "open", "closed", "the shop"), ("started", "start", "stopped", "the project"),
         ("likes", "like", "dislikes", "jazz"), ("enjoys", "enjoy", "hates", "cooking"),
         ("trusts", "trust", "distrusts", "the mechanic"), ("fixed", "fix", "broke", "the bike"),
         ("admires", "admire", "despises", "the mayor")]
NEWS = ["the museum opens a new wing", "a storm is expected on Friday", "the recipe needs saffron",
        "the bus route changes in May", "the garden needs more sun", "the printer is out of ink",
        "the concert was sold out", "the river flooded the meadow", "the library extends its hours",
        "the bakery started selling bagels"]


def _filler(rng: np.random.Generator, n: int) -> list[str]:
    """Sentences of 8–30 words from a Zipf(1.1) vocabulary of made-up words."""
    syllables = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    words = list({"".join(rng.choice(syllables, 3)) for _ in range(20_000)})
    p = np.arange(1, len(words) + 1, dtype=np.float64) ** -1.1
    p /= p.sum()
    lengths = rng.integers(8, 31, size=n)
    picks = rng.choice(len(words), size=int(lengths.sum()), p=p)
    out, start = [], 0
    for length in lengths:
        out.append(" ".join(words[i] for i in picks[start:start + length]))
        start += length
    return out


def _mixed(rng: random.Random) -> tuple[list[str], list[tuple[str, str]]]:
    """200 stored statements and 400 (kind, item) probes against them."""
    probes: list[tuple[str, str]] = []
    pairs = [(n, f) for n in NAMES for f in FACTS]
    stored = [f"{n.capitalize()} {verb} {obj}" for n, (verb, _, _, obj) in pairs]
    for statement in rng.sample(stored, 100):
        probes.append(("restatement", f"Honestly, {statement[0].lower()}{statement[1:]}"))
    for n, (_, base, _, obj) in rng.sample(pairs, 100):
        probes.append(("negation", f"{n.capitalize()} does not {base} {obj}"))
    for n, (_, _, opposite, obj) in rng.sample(pairs, 100):
        probes.append(("antonym", f"{n.capitalize()} {opposite} {obj}"))
    days = ["on Monday", "on Tuesday", "on Wednesday", "on Thursday", "on Friday", "this weekend",
            "next week", "in March", "in the spring", "tonight"]
    for i in range(100):
        probes.append(("news", f"{NEWS[i % 10].capitalize()} {days[i // 10]}"))
    return stored, probes


async def run() -> list[dict]:
    rows: list[dict] = []
    async with bench_pool("bench_gates", max_size=8) as pool:
        embedder = WordLlamaEmbedder()
        store = MemoryStore(pool, embedder)
        rng = np.random.default_rng(5)

        await pool.execute("DROP INDEX idx_memories_embedding")
        filler = _filler(rng, 100_000)
        for i in range(0, len(filler), 5_000):
            await store.store_many([NewMemory(t) for t in filler[i:i + 5_000]])
        await build_hnsw(pool)

        settings = GateSettings()
        gates = Gates.build(pool, embedder, ReflexLanguageModel("benchmark"), settings, Safety(),
                            rng=random.Random(1))
        # one-off costs, measured apart: learning the negation direction (once per embed
        # model, then read from the database) and the store centroid (every 300 s)
        started = time.perf_counter()
        await gates.exit.negation_direction()
        rows.append({"name": "learn + cache the negation direction (once per embed model)",
                     "value": (time.perf_counter() - started) * 1000, "unit": "ms"})
        started = time.perf_counter()
        await gates.exit.centroid.get(pool, embedder.model_name)
        rows.append({"name": "store centroid at 100k memories (recomputed every 300 s)",
                     "value": (time.perf_counter() - started) * 1000, "unit": "ms"})
        items = [f"New thing number {i}: " + t for i, t in enumerate(_filler(rng, 2_000))]
        started = time.perf_counter()
        for text in items:
            await gates.admit(text, exchange=False)
        entry_s = time.perf_counter() - started
        started = time.perf_counter()
        report = await gates.exit.flush(reason="benchmark")
        exit_s = time.perf_counter() - started
        assert report.evaluated == len(items), report
        persisted = report.actions.get("persist", 0) + report.actions.get("persist_flag", 0)
        rows += [
            {"name": "entry gate at 100k memories (admit, one by one)", "value": len(items) / entry_s,
             "unit": "items/s"},
            {"name": "exit gate at 100k memories (flush, chunks of 100, no LLM)",
             "value": len(items) / exit_s, "unit": "items/s"},
            {"name": "entry + exit gate into the store at 100k memories",
             "value": len(items) / (entry_s + exit_s), "unit": "items/s"},
            {"name": "  share of those items persisted (HNSW inserts)",
             "value": 100.0 * persisted / len(items), "unit": "%"},
        ]

        await pool.execute("TRUNCATE memories CASCADE")
        await pool.execute("TRUNCATE scratch_buffer, held_memories, gate_decisions")
        stored, probes = _mixed(random.Random(2))
        await store.store_many([NewMemory(t) for t in stored])
        for _, text in probes:
            await gates.admit(text, exchange=False)
        await gates.exit.flush(reason="mixed set")
        kinds = dict((text, kind) for kind, text in probes)
        decided = await pool.fetch("SELECT content_preview, cell_novelty, details FROM gate_decisions "
                                   "WHERE gate = 'exit'")
        by_kind: dict[str, list[bool]] = {}
        cells: dict[str, list[str]] = {}
        for row in decided:
            layers = [v["layer"] for v in json.loads(row["details"])["verdicts"]]
            kind = kinds[row["content_preview"]]
            by_kind.setdefault(kind, []).append("llm_skipped" in layers)
            cells.setdefault(kind, []).append(row["cell_novelty"])
        total = [x for v in by_kind.values() for x in v]
        rows.append({"name": "decisions needing the LLM micro-call, mixed set of 400",
                     "value": 100.0 * sum(total) / len(total), "unit": "%"})
        for kind in ("restatement", "negation", "antonym", "news"):
            share = by_kind.get(kind, [])
            rows.append({"name": f"  of which {kind} items (100)",
                         "value": 100.0 * sum(share) / max(1, len(share)), "unit": "%"})
        for kind, cell in (("restatement", "confirming"), ("negation", "contradicting"),
                           ("antonym", "contradicting"), ("news", "novel")):
            got = cells.get(kind, [])
            rows.append({"name": f"{kind} items judged {cell} (layers 1-2 only)",
                         "value": 100.0 * got.count(cell) / max(1, len(got)), "unit": "%"})
    return rows
