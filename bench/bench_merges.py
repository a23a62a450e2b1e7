"""Merges on real conversations (issue 22): how many distinct turns one deep pass supersedes.

    python -m bench merges                      the rows below (`make bench` runs it too)
    python -m bench.bench_merges --calibrate    the threshold sweep on the calibration half
    python -m bench.bench_merges --show 20      20 random merges of the report half, to read
    ... --embedder wordllama                    another offline embedder than the default

Data: bench/data/realconv_turns.jsonl (REALTALK: ten pairs of real people messaging for
21 days; bench/data/README.md says how to make it). Conversations in chat-number order:
the first five are the calibration half (3,309 turns; the thresholds were chosen on it),
the last five the report half (5,635 turns; only measured).

Each conversation is its own store, as in bench/bench_realconv.py (one agent's memory of
one relationship), filled the way `python -m src.memory import` writes: one episodic
memory per turn, content `"<speaker>: <text>"`, event time the message's, embedded by
the offline embedder (`--embedder`, default the configured `providers.embeddings.offline`). Then one deep pass runs offline (no language model)
with every turn a merge candidate (`merge_candidates` = the turns, as enough hourly
passes would make them).

A superseded turn is a *true duplicate* when some other member of its merge has the same
content words (`clustering.content_words`: the lower-cased words minus the stop words;
negations, question words and before/after kept; a text of stop words only keeps them
all). Superseding it loses nothing another source does not say in the same words. Every
other superseded turn is a *false merge*; the false-merge rate is false merges / all
turns of the half (target <= 1%). The rule is strict: a paraphrase ("Hello Kate. How are
you today?" / "How are you doing today Kate?") counts as false, so the rate is an upper
bound; `--show` prints merges to check by hand.

"before" is the rule before issue 22, computed on the same candidates without writing:
leader clusters at cosine 0.85, every member superseded. "after" is what the deep pass
wrote with ConsolidationSettings()'s thresholds for the embed model, read back from the
database; "stating every source" counts merged memories that hold every content word of
every source (the extractive merge's promise).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg
import numpy as np

from bench.common import OFFLINE_EMBEDDERS, bench_pool, offline_embedder
from bench.realconv_dataset import TURNS
from src.consolidation.clustering import content_words, leader_clusters, words
from src.consolidation.deep import clusters_repository, memories_repository
from src.consolidation.deep.deep_pass import ConsolidationParts, run_deep_pass
from src.consolidation.deep.merge import EMBED_BATCH, PREFILTER_MARGIN, merge_groups
from src.consolidation.settings import ConsolidationSettings, DeepSettings, SimilarityThresholds
from src.providers.protocols import Embedder
from src.recall import hnsw
from src.recall.bulk_import import ImportRecord, write_batch
from src.recall.store import NewMemory
from src.weights.safety import Safety

HALF_CONVERSATIONS = 5
IMPORT_BATCH = 500
#: The rule before issue 22: cosine only, at the default entry's 0.85.
BEFORE = SimilarityThresholds(merge=0.85, merge_overlap=0.0)
#: The sweep of `--calibrate`.
SWEEP_MERGE = (0.75, 0.8, 0.85, 0.88, 0.9, 0.92, 0.95)
SWEEP_OVERLAP = (0.0, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.0)

Conversation = list[dict]


def halves() -> tuple[list[Conversation], list[Conversation]]:
    """(calibration, report): the first and the last five conversations, each its turns."""
    if not TURNS.exists():
        raise SystemExit(f"{TURNS} is missing: make it with bench/realconv_dataset.py (bench/data/README.md)")
    turns = [json.loads(line) for line in TURNS.read_text(encoding="utf-8").splitlines() if line.strip()]
    order = sorted({t["conv"] for t in turns}, key=lambda conv: int(conv.split("_")[1]))
    convs = [[t for t in turns if t["conv"] == conv] for conv in order]
    return convs[:HALF_CONVERSATIONS], convs[HALF_CONVERSATIONS:]


async def import_turns(pool: asyncpg.Pool, embedder: Embedder, turns: Conversation) -> None:
    """The turns as bench_realconv imports them (index dropped, then rebuilt, as `--index auto`)."""
    await hnsw.drop_index(pool)
    records = [ImportRecord(NewMemory(f"{t['speaker']}: {t['text']}", event_time=datetime.fromisoformat(t["time"]),
                                      metadata={"turn": t["turn"], "speaker": t["speaker"]}), n)
               for n, t in enumerate(turns, 1)]
    for start in range(0, len(records), IMPORT_BATCH):
        await write_batch(pool, embedder, records[start:start + IMPORT_BATCH], {})
    await hnsw.rebuild_index(pool)


@dataclass(frozen=True)
class Candidates:
    """What the merge phase reads: stored-vector neighbour pairs, the texts, CLUSTERING vectors."""

    pairs: list[tuple[int, int, float]]
    ids: list[int]
    texts: list[str]
    vectors: np.ndarray

    def passing(self, merge: float) -> list[int]:
        """Indices of the candidates the stored-vector pre-filter passes at threshold `merge`."""
        floor = merge - PREFILTER_MARGIN
        keep = {m for a, b, s in self.pairs if s >= floor for m in (a, b)}
        return [i for i, mid in enumerate(self.ids) if mid in keep]


async def candidates(pool: asyncpg.Pool, embedder: Embedder, n: int, loosest: float) -> Candidates:
    """The merge phase's reads (merge.find_clusters) at the loosest threshold to be tried."""
    rows = await clusters_repository.merge_candidates(pool, embedder.model_name, n, DeepSettings().merge_neighbours,
                                             loosest - PREFILTER_MARGIN)
    pairs = [(r["a"], r["b"], float(r["sim"])) for r in rows]
    memories = await memories_repository.memories_by_id(pool, sorted({m for a, b, _ in pairs for m in (a, b)}))
    texts = [m["content"] for m in memories]
    vectors = [await embedder.embed(texts[i:i + EMBED_BATCH], "CLUSTERING") for i in range(0, len(texts), EMBED_BATCH)]
    return Candidates(pairs, [m["id"] for m in memories], texts,
                      np.vstack(vectors) if vectors else np.zeros((0, embedder.dimensions), dtype=np.float32))


@dataclass(frozen=True)
class Outcome:
    merges: int = 0
    superseded: int = 0
    false: int = 0

    def __add__(self, other: Outcome) -> Outcome:
        return Outcome(self.merges + other.merges, self.superseded + other.superseded, self.false + other.false)


def outcome(groups: Iterable[Sequence[str]]) -> Outcome:
    """Merges, superseded turns and false merges of clusters given by their members' texts."""
    merges = superseded = false = 0
    for texts in groups:
        content = [content_words(t) for t in texts]
        merges += 1
        superseded += len(texts)
        false += sum(1 for i, c in enumerate(content) if all(c != o for j, o in enumerate(content) if j != i))
    return Outcome(merges, superseded, false)


def planned(c: Candidates, th: SimilarityThresholds, *, guarded: bool, min_size: int = 2) -> list[list[str]]:
    """The clusters' texts at `th` without writing: `guarded` is merge_groups (what the pass
    does now), else the rule before issue 22 (leader clusters on cosine, all superseded)."""
    idx = c.passing(th.merge)
    texts = [c.texts[i] for i in idx]
    vectors = c.vectors[idx]
    if guarded:
        return [[texts[i] for i in g.members] for g in merge_groups(vectors, texts, th.merge, th.merge_overlap, min_size)]
    return [[texts[i] for i in g] for g in leader_clusters(vectors, th.merge, min_size)]


async def written(pool: asyncpg.Pool) -> list[tuple[str, list[str]]]:
    """The merges the deep pass wrote: (merged text, its sources' texts)."""
    rows = await pool.fetch(
        """SELECT i.content AS merged, array_agg(m.content ORDER BY m.id) AS sources
             FROM memories i JOIN memory_supersedes s ON s.insight_id = i.id AND s.via = 'merge'
             JOIN memories m ON m.id = s.source_id GROUP BY i.id, i.content ORDER BY i.id""")
    return [(r["merged"], list(r["sources"])) for r in rows]


def states_every_source(merged: str, sources: Sequence[str]) -> bool:
    """Whether every content word of every source is in the merged text."""
    held = set(words(merged))
    return all(content_words(s) <= held for s in sources)


@dataclass
class Half:
    turns: int = 0
    before: Outcome = Outcome()
    after: Outcome = Outcome()
    merged: list[tuple[str, list[str]]] = field(default_factory=list)   # (merged text, sources)


async def measure(name: str, convs: list[Conversation], embedder: Embedder) -> Half:
    """One offline deep pass per conversation of a half; the before rule on the same candidates."""
    half = Half()
    for n, turns in enumerate(convs):
        settings = ConsolidationSettings(deep=DeepSettings(merge_candidates=len(turns)))
        loosest = min(BEFORE.merge, settings.thresholds_for(embedder.model_name).merge)
        async with bench_pool(f"bench_merges_{name}_{n}") as pool:
            await import_turns(pool, embedder, turns)
            c = await candidates(pool, embedder, len(turns), loosest)
            report = await run_deep_pass(ConsolidationParts(pool, embedder=embedder, llm=None, safety=Safety(),
                                                            settings=settings),
                                         trigger="manual")
            assert report is not None and report.status == "done", report
            merged = await written(pool)
        half.turns += len(turns)
        half.before += outcome(planned(c, BEFORE, guarded=False))
        half.after += outcome(sources for _, sources in merged)
        half.merged += merged
    return half


def rows_of(name: str, half: Half, after: SimilarityThresholds) -> list[dict]:
    rows = [{"name": f"{name}: turns", "value": half.turns, "unit": "turns"}]
    for rule, o in ((f"before (cos {BEFORE.merge}, no guard)", half.before),
                    (f"after (cos {after.merge}, overlap {after.merge_overlap})", half.after)):
        rows += [{"name": f"{name} {rule}: merges", "value": o.merges, "unit": "merges"},
                 {"name": f"{name} {rule}: superseded", "value": o.superseded, "unit": "turns"},
                 {"name": f"{name} {rule}: false merges", "value": o.false, "unit": "turns"},
                 {"name": f"{name} {rule}: false-merge rate", "value": 100.0 * o.false / half.turns,
                  "unit": "% of turns"}]
    kept = sum(states_every_source(m, s) for m, s in half.merged)
    rows.append({"name": f"{name} after: merged memories stating every source's content words", "value": kept,
                 "unit": f"of {len(half.merged)}"})
    return rows


async def run(embedder_name: str | None = None) -> list[dict]:
    if not TURNS.exists():      # `make bench` goes on without it (REALTALK is not committed)
        return [{"name": f"skipped: {TURNS.name} missing (bench/data/README.md)", "value": 0, "unit": ""}]
    embedder = offline_embedder(embedder_name)
    after = ConsolidationSettings().thresholds_for(embedder.model_name)
    calibration, report = halves()
    return (rows_of("calibration", await measure("calibration", calibration, embedder), after)
            + rows_of("report", await measure("report", report, embedder), after))


async def calibrate(embedder_name: str | None = None) -> None:
    """Print the sweep's merges, superseded turns and false merges on the calibration half."""
    embedder = offline_embedder(embedder_name)
    convs, _ = halves()
    found = []
    for n, turns in enumerate(convs):
        async with bench_pool(f"bench_merges_sweep_{n}") as pool:
            await import_turns(pool, embedder, turns)
            found.append(await candidates(pool, embedder, len(turns), min(SWEEP_MERGE)))
    total = sum(len(t) for t in convs)
    print(f"calibration half: {total:,} turns in {len(convs)} conversations")
    print("merge  overlap  merges  superseded  false  false %")
    for merge in SWEEP_MERGE:
        for overlap in SWEEP_OVERLAP:
            th = SimilarityThresholds(merge=merge, merge_overlap=overlap)
            o = sum((outcome(planned(c, th, guarded=True)) for c in found), Outcome())
            print(f"{merge:5.2f}  {overlap:7.2f}  {o.merges:6d}  {o.superseded:10d}  {o.false:5d}  "
                  f"{100.0 * o.false / total:7.2f}")


async def show(n: int, embedder_name: str | None = None) -> None:
    """Print `n` random merges of the report half: the merged text, then each source."""
    _, convs = halves()
    half = await measure("show", convs, offline_embedder(embedder_name))
    for merged, sources in random.Random(22).sample(half.merged, min(n, len(half.merged))):
        print(f"MERGED: {merged}")
        for s in sources:
            print(f"   <- {s}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_merges", description=__doc__.splitlines()[0])
    parser.add_argument("--calibrate", action="store_true", help="the threshold sweep on the calibration half")
    parser.add_argument("--show", type=int, metavar="N", help="print N random merges of the report half")
    parser.add_argument("--embedder", choices=OFFLINE_EMBEDDERS,
                        help="the offline embedder (default: providers.embeddings.offline's default)")
    args = parser.parse_args(argv)
    if args.calibrate:
        asyncio.run(calibrate(args.embedder))
    elif args.show:
        asyncio.run(show(args.show, args.embedder))
    else:
        for row in asyncio.run(run(args.embedder)):
            print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
