"""Recall on real human conversations (REALTALK, bench/data/README.md): recall's tuning target.

    python -m bench realconv                 # part of `make bench`
    python -m bench.bench_realconv --tune [CONFIG]   # the grid behind runtime.yaml's values (15–25 min)
    python -m bench.bench_realconv --context         # conversation context: turns and weight
    python -m bench.bench_realconv --config FILE     # the report with another runtime.yaml

Each conversation is its own store, as one agent's memory of one relationship (the ten
conversations share people, so one store would mix their lives). Its turns go in through
the CLI's bulk import path (`write_batch`) with the configured embedder (offline:
MiniLM; `--config` another runtime.yaml), one memory per turn, each session a
conversation (every turn carries the two before it: src/recall/conversation.py):

- content `"<speaker>: <text>"`: the questions name people ("When did Fahim go for a
  run?"), and in a chat the speaker is who the turn is about; without the name the
  full-text arm could not match it and the vector would not carry it;
- `event_time` = the message's time, episodic, source `external_user` (both speakers are
  people the agent heard); metadata keeps `turn` (the turn id the evidence names).

Then every question of the conversation is asked and evidence recall@5/10/20 reported
(the share of a question's evidence turns in the top k, averaged over questions),
separately for the `tune` and `report` conversations, for:

- the vector arm alone and the full-text arm alone (the hybrid statement with the other
  arm's weight and recency at 0);
- the bare hybrid statement with the configured arm weights and rrf_k;
- the full pipeline through `python -m src.memory search --k 20`'s code path (Retriever,
  read-only, `keep` 20, the configured reranker — skipped offline), mean of 3 seeds;
- the pipeline on the questions that name a period and on those that ask when, with and
  without the time logic (src/recall/in_time.py; `now` below stands for when they are asked);
- the same pipeline after one deep consolidation pass over the store (offline: no
  language model, so the LLM phases are skipped and merge is extractive). A merge
  writes an insight and links it to the memories it supersedes (`memory_supersedes`),
  which get contradict(0.3) so the insight surfaces first: the insight stands for
  them, so a found insight counts every turn it supersedes (links followed
  transitively) as found.

`now` is one day after the conversation's last turn, for search, pipeline and the pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import asyncpg
import numpy as np

from bench.common import bench_pool
from bench.realconv_dataset import QUESTIONS, TURNS
from src.config import Settings, load_settings
from src.consolidation.deep.deep_pass import ConsolidationParts, run_deep_pass
from src.memory.jsonl import parse_line
from src.providers.factory import Providers, build_providers
from src.providers.protocols import Embedder, Reranker
from src.recall import relevance, retrieval, scoring
from src.recall.bulk_import import ImportRecord, write_batch
from src.recall.conversation import CONTEXT_TURNS, Threads, follow_record
from src.recall.relevance import COMPONENTS, SEMANTIC_SIGNALS
from src.recall.retrieval import Cue, Retriever
from src.recall.search import search_hybrid
from src.recall.settings import ArmWeights, RetrievalSettings
from src.recall.timeframe import asks_when, question_time
from src.weights.safety import Safety

KS = (5, 10, 20)
#: The pipeline's rows are the mean over these seeds of its random generator.
SEEDS = (12, 13, 14)
SPLITS = ("tune", "report")
BATCH = 500
#: --tune: the grid (w_fulltext stays 1: the fused score is rrf / rrf_max, so only the
#: ratio of the arm weights matters) and how many arms settings reach the pipeline stage.
GRID_W_VECTOR = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5)
GRID_W_RECENCY = (0.0, 0.05, 0.1, 0.2)
GRID_RRF_K = (10, 30, 60, 100)
GRID_ACTIVATION_SHARE = (0.0, 0.15, 0.3)
TOP_ARMS = 5

Ranked = list[list[int]]
#: One way of asking a store its questions: the ranked memory ids per question.
Run = Callable[["Store"], Awaitable[Ranked]]


def _read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def hits_at(found: Sequence[Sequence[frozenset[str]]], evidence: Sequence[frozenset[str]], k: int) -> np.ndarray:
    """Per question: |evidence ∩ what the top k cover| / |evidence|."""
    return np.array([len(frozenset().union(*f[:k]) & e) / len(e) for f, e in zip(found, evidence, strict=True)])


def recall_at(found: Sequence[Sequence[frozenset[str]]], evidence: Sequence[frozenset[str]], k: int) -> float:
    """Mean over questions of |evidence ∩ what the top k cover| / |evidence|."""
    return float(np.mean(hits_at(found, evidence, k)))


@dataclass
class Store:
    """One conversation's memories in a database of their own, and its questions."""

    conv: str
    split: str
    pool: asyncpg.Pool
    embedder: Embedder
    reranker: Reranker | None
    now: datetime
    questions: list[dict]
    vectors: list[np.ndarray] = field(default_factory=list)
    covers: dict[int, frozenset[str]] = field(default_factory=dict)   # memory id → turn ids it stands for

    async def load(self, turns: Sequence[dict], context: ContextPlan) -> None:
        """The turns as the CLI's import stores them: each session a `conversation`, so every
        turn carries the ones before it (src/recall/conversation.py), `context.turns` of them."""
        lines = (json.dumps({"content": f"{t['speaker']}: {t['text']}", "memory_type": "episodic",
                             "event_time": t["time"], "source_tag": "external_user",
                             "conversation": f"{t['conv']}/{t['session']}", "turn": n,
                             "metadata": {"turn": t["turn"], "conv": t["conv"], "session": t["session"],
                                          "speaker": t["speaker"]}}) for n, t in enumerate(turns))
        threads = Threads(turns=context.turns)
        records = [context.shaped(follow_record(threads, parse_line(line, n)))
                   for n, line in enumerate(lines, start=1)]
        for start in range(0, len(records), BATCH):
            await write_batch(self.pool, self.embedder, records[start:start + BATCH], {})
        self.vectors = await self.embedder.embed([q["question"] for q in self.questions], "RETRIEVAL_QUERY")
        await self.read_covers()

    async def read_covers(self) -> None:
        """Each memory's turn ids: its own, plus those of what it supersedes, transitively."""
        turn = {r["id"]: r["turn"] for r in await self.pool.fetch(
            "SELECT id, metadata->>'turn' AS turn FROM memories")}
        sources: dict[int, list[int]] = defaultdict(list)
        for r in await self.pool.fetch("SELECT insight_id, source_id FROM memory_supersedes"):
            sources[r["insight_id"]].append(r["source_id"])

        def cover(mid: int, seen: frozenset[int]) -> frozenset[str]:
            own = frozenset([turn[mid]]) if turn.get(mid) else frozenset()
            return own.union(*(cover(s, seen | {mid}) for s in sources[mid] if s not in seen))

        self.covers = {mid: cover(mid, frozenset()) for mid in turn}

    def covered(self, ranked: Ranked) -> list[list[frozenset[str]]]:
        return [[self.covers.get(mid, frozenset()) for mid in ids] for ids in ranked]

    async def hybrid(self, arms: ArmWeights, k: float, candidates: int, *, vector: bool = True,
                     w_context: float = RetrievalSettings().context_weight) -> Ranked:
        out = []
        for q, v in zip(self.questions, self.vectors, strict=True):
            hits = await search_hybrid(self.pool, q["question"], v if vector else None,
                                       embed_model=self.embedder.model_name, limit=20, k=k,
                                       w_vector=arms.w_vector, w_fulltext=arms.w_fulltext,
                                       w_recency=arms.w_recency, candidates=candidates, now=self.now,
                                       w_context=w_context, fts_confidence=arms.fts_confidence)
            out.append([h.id for h in hits])
        return out

    async def pipeline(self, cfg: RetrievalSettings, safety: Safety, seed: int) -> Ranked:
        """`python -m src.memory search --k 20`'s path: keep 20, read-only, one rng for the batch."""
        cfg = cfg.model_copy(update={"keep": 20, "limit": max(cfg.limit, 20)})
        retriever = Retriever(self.pool, self.embedder, self.reranker, safety, cfg)
        rng = np.random.default_rng(seed)
        out = []
        for q, v in zip(self.questions, self.vectors, strict=True):
            r = await retriever.retrieve(Cue(q["question"], vec=v), rng=rng, now=self.now, mutate=False)
            out.append(r.ids)
        return out

    async def deep_pass(self, settings: Settings, providers: Providers) -> dict[str, int]:
        """One offline deep pass at `now`; the new covers; what merge did."""
        report = await run_deep_pass(ConsolidationParts(self.pool, embedder=providers.embedder, llm=None,
                                                        safety=Safety(settings.weights.safety),
                                                        settings=settings.consolidation),
                                     trigger="manual", now=self.now)
        if report is None or report.status != "done":
            raise RuntimeError(f"{self.conv}: the deep pass did not finish ({report and report.status})")
        await self.read_covers()
        row = await self.pool.fetchrow(
            "SELECT count(DISTINCT insight_id) AS insights, count(*) AS links FROM memory_supersedes")
        return {"insights": row["insights"], "links": row["links"]}


@dataclass(frozen=True)
class ContextPlan:
    """How a store's turns carry their conversation: `turns` before each as its context
    (0: none, as before issue 35); `in_vector`: the context embedded with the turn too
    (as a §4.6 preamble is: `content_contextualized`), not only indexed for full text."""

    turns: int = CONTEXT_TURNS
    in_vector: bool = False

    def shaped(self, record: ImportRecord) -> ImportRecord:
        context = record.memory.context
        if not self.in_vector or context is None:
            return record
        return dataclasses.replace(record, content_contextualized=f"{context}\n\n{record.memory.content}")


class Evaluation:
    """The stores of the conversations asked for, open for as long as the evaluation runs."""

    def __init__(self, settings: Settings, providers: Providers, stack: AsyncExitStack,
                 context: ContextPlan = ContextPlan()):
        self.settings, self.providers, self.stack = settings, providers, stack
        self.context = context
        self.stores: list[Store] = []

    async def open(self, splits: Iterable[str]) -> None:
        turns = _read_jsonl(TURNS)
        questions = _read_jsonl(QUESTIONS)
        wanted = set(splits)
        convs = list(dict.fromkeys(q["conv"] for q in questions if q["split"] in wanted))
        for n, conv in enumerate(convs):
            mine = [t for t in turns if t["conv"] == conv]
            asked = [q for q in questions if q["conv"] == conv]
            pool = await self.stack.enter_async_context(bench_pool(f"bench_realconv_{n}_{self.context.turns}"
                                                                   f"{'v' if self.context.in_vector else ''}"))
            last = max(datetime.fromisoformat(t["time"]) for t in mine)
            store = Store(conv, asked[0]["split"], pool, self.providers.embedder, self.providers.reranker,
                          last + timedelta(days=1), asked)
            await store.load(mine, self.context)
            self.stores.append(store)

    def evidence(self, split: str) -> list[frozenset[str]]:
        return [frozenset(q["evidence"]) for s in self.stores if s.split == split for q in s.questions]

    async def found(self, split: str, run: Run) -> list[list[frozenset[str]]]:
        """`run(store)` → ranked ids per question; their covers, over the split's stores in order."""
        out: list[list[frozenset[str]]] = []
        for store in self.stores:
            if store.split == split:
                out += store.covered(await run(store))
        return out

    async def per_question(self, split: str, runs: Sequence[Run], k: int = 10) -> np.ndarray:
        """recall@k of each question of `split`, averaged over the runs (the pipeline's seeds)."""
        evidence = self.evidence(split)
        return np.mean([hits_at(await self.found(split, run), evidence, k) for run in runs], axis=0)

    async def rows(self, label: str, runs: Sequence[Run]) -> list[dict]:
        """recall@k rows for each split of the open stores."""
        out = []
        for split in SPLITS:
            evidence = self.evidence(split)
            if not evidence:
                continue
            found = [await self.found(split, run) for run in runs]
            out += [{"name": f"{split}: {label}: recall@{k}",
                     "value": 100 * float(np.mean([recall_at(f, evidence, k) for f in found])), "unit": "%"}
                    for k in KS]
        return out

    async def subset_rows(self, label: str, runs: Sequence[Run], keep: Callable[[dict, Store], bool]) -> list[dict]:
        """recall@5/@10 rows over the questions `keep(question, store)` picks, per split."""
        out = []
        for split in SPLITS:
            mask = np.array([keep(q, s) for s in self.stores if s.split == split for q in s.questions], dtype=bool)
            if not mask.any():
                continue
            evidence = [e for e, m in zip(self.evidence(split), mask, strict=True) if m]
            found = [[f for f, m in zip(await self.found(split, run), mask, strict=True) if m] for run in runs]
            out += [{"name": f"{split}: {label} ({int(mask.sum())}): recall@{k}",
                     "value": 100 * float(np.mean([recall_at(f, evidence, k) for f in found])), "unit": "%"}
                    for k in (5, 10)]
        return out

    def pipeline_runs(self, cfg: RetrievalSettings) -> list[Run]:
        safety = Safety(self.settings.weights.safety)
        return [lambda s, seed=seed: s.pipeline(cfg, safety, seed) for seed in SEEDS]


#: The score components the ablation takes out one at a time (issue 35 item 3).
ABLATIONS = ("ACT-R", "co-activation", "recency", "noise", "user's word", "decisive full text")


@contextlib.contextmanager
def ablated(name: str, cfg: RetrievalSettings, model: str) -> Iterator[RetrievalSettings]:
    """The settings without component `name` (and, for the duration, the code paths that
    carry it patched to a constant: a constant column reorders nothing)."""
    update: dict = {}
    constant: dict[int, float] = {}
    originals = {"coactivation": scoring.coactivation, "components": relevance.relevance_components,
                 "decisive": retrieval.keep_decisive}
    if name == "ACT-R":
        update["activation_share"] = 0.0
    elif name == "co-activation":
        scoring.coactivation = lambda hits, *_: np.zeros(len(hits))
    elif name == "recency":
        arms = cfg.arm_weights(model).model_copy(update={"w_recency": 0.0})
        update["arms"] = {**cfg.arms, model: arms}
        constant[COMPONENTS.index("recency")] = 0.0
    elif name == "noise":
        update["act_r"] = cfg.act_r.model_copy(update={"s": 0.0})
        constant[COMPONENTS.index("noise")] = 0.5
    elif name == "user's word":
        update["user_word"] = 0.0
    elif name == "decisive full text":
        retrieval.keep_decisive = lambda ranked, keep: ranked
    if constant:
        def components(*args, **kwargs):
            comps = originals["components"](*args, **kwargs)
            for column, value in constant.items():
                comps[:, column] = value
            return comps
        relevance.relevance_components = components
    try:
        yield cfg.model_copy(update=update)
    finally:
        scoring.coactivation = originals["coactivation"]
        relevance.relevance_components = originals["components"]
        retrieval.keep_decisive = originals["decisive"]


def _arms(cfg: RetrievalSettings, model: str) -> tuple[ArmWeights, float]:
    return cfg.arm_weights(model), cfg.rrf_k_for(model)


async def run(config: str | None = None) -> list[dict]:
    """Every row of the report; `config`: a runtime.yaml other than ./runtime.yaml."""
    if not (TURNS.exists() and QUESTIONS.exists()):   # not in git: REALTALK has no licence
        return [{"name": "skipped: no bench/data/realconv_*.jsonl (make them: python -m bench.realconv_dataset "
                         "MIRROR, bench/data/README.md)", "value": 0, "unit": "n/a"}]
    started = time.perf_counter()
    settings = load_settings(config, env={})
    providers = build_providers(settings.providers, settings.secrets, None, None)
    cfg = settings.recall.retrieval
    model = providers.embedder.model_name
    arms, k = _arms(cfg, model)
    async with AsyncExitStack() as stack:
        ev = Evaluation(settings, providers, stack)
        await ev.open(SPLITS)
        rows = [row for split in SPLITS for row in (
            {"name": f"{split}: conversations ({model})", "value": sum(s.split == split for s in ev.stores),
             "unit": "conversations"},
            {"name": f"{split}: turns", "value": sum(len(s.covers) for s in ev.stores if s.split == split),
             "unit": "memories"},
            {"name": f"{split}: questions", "value": len(ev.evidence(split)), "unit": "questions"})]
        rows += await ev.rows("vector arm alone", [
            lambda s: s.hybrid(ArmWeights(w_vector=1, w_fulltext=0, w_recency=0), k, cfg.candidates)])
        rows += await ev.rows("full-text arm alone", [
            lambda s: s.hybrid(ArmWeights(w_vector=0, w_fulltext=1, w_recency=0), k, cfg.candidates,
                               vector=False)])
        rows += await ev.rows(
            f"bare hybrid (w_vector {arms.w_vector:g}, w_fulltext {arms.w_fulltext:g}, "
            f"w_recency {arms.w_recency:g}, k {k:g})",
            [lambda s: s.hybrid(arms, k, cfg.candidates)])
        reranked = "no rerank" if providers.reranker.skipped else "rerank"
        label = f"full pipeline ({reranked}, activation_share {cfg.activation_share:g}; mean of 3 seeds)"
        rows += await ev.rows(label, ev.pipeline_runs(cfg))
        for name in ABLATIONS:
            with ablated(name, cfg, model) as variant:
                rows += await ev.rows(f"  ablation: pipeline without {name}", ev.pipeline_runs(variant))
        # time in questions (issue 37 item 2, src/recall/in_time.py): the questions that name a
        # period and those that ask when, with the time logic and without it
        timeless = cfg.model_copy(update={"frame_join": 0, "frame_boost": 1.0, "when_boost": 1.0})
        for name, keep in (("questions naming a time", lambda q, s: question_time(q["question"], s.now) is not None),
                           ("questions asking when", lambda q, s: asks_when(q["question"]))):
            rows += await ev.subset_rows(f"pipeline, {name}", ev.pipeline_runs(cfg), keep)
            rows += await ev.subset_rows(f"  without the time logic, {name}", ev.pipeline_runs(timeless), keep)
        for signal in SEMANTIC_SIGNALS:     # the alternatives for the semantic component
            if signal != cfg.semantic_signal:
                variant = cfg.model_copy(update={"semantic_signal": signal})
                rows += await ev.rows(f"  variant: pipeline with semantic = {signal}", ev.pipeline_runs(variant))
        merged = defaultdict(int)
        for store in ev.stores:
            for key, n in (await store.deep_pass(settings, providers)).items():
                merged[key] += n
        rows += [{"name": "deep pass: merge insights", "value": merged["insights"], "unit": "memories"},
                 {"name": "deep pass: supersedes links", "value": merged["links"], "unit": "links"}]
        rows += await ev.rows("pipeline after one deep pass", ev.pipeline_runs(cfg))
    await providers.aclose()
    rows.append({"name": "wall time", "value": time.perf_counter() - started, "unit": "s"})
    return rows


@dataclass(frozen=True)
class Trial:
    """One grid point of --tune and its recall@10 per tune question."""

    scores: np.ndarray
    arms: ArmWeights
    activation_share: float
    semantic_signal: str

    def knobs(self) -> tuple:
        return (self.arms.w_vector, self.arms.w_recency, self.arms.rrf_k, self.activation_share,
                self.semantic_signal)

    def line(self) -> str:
        return (f"w_vector {self.arms.w_vector:<4g} w_recency {self.arms.w_recency:<4g} rrf_k {self.arms.rrf_k:<3g} "
                f"activation_share {self.activation_share:<4g} semantic {self.semantic_signal:<6}  "
                f"recall@10 {self.scores.mean():.3f}")


def choose(trials: Sequence[Trial], configured: Trial) -> Trial:
    """The best mean recall@10, unless settings closer to the configured ones do as well.

    A trial "does as well" when the best beats it by at most one standard error of their
    paired per-question difference: at ~350 questions such gaps are noise, and a change
    the tune half cannot tell from noise should not move a default. Among those, the
    fewest knobs changed from `configured` wins, then the higher mean.
    """
    best = max(trials, key=lambda t: t.scores.mean())

    def as_good(t: Trial) -> bool:
        diff = best.scores - t.scores
        return diff.mean() <= diff.std(ddof=1) / np.sqrt(len(diff))

    def changed(t: Trial) -> int:
        return sum(a != b for a, b in zip(t.knobs(), configured.knobs(), strict=True))

    return min((t for t in trials if as_good(t)), key=lambda t: (changed(t), -t.scores.mean()))


async def tune(config: str | None = None) -> None:
    """Pick recall's values on the tune conversations by recall@10; report is never opened.

    Coarse to fine, because the pipeline only reorders (and, by spreading, adds to) the
    hybrid statement's top 20: every arms setting (w_vector, w_recency, rrf_k) is scored
    on the bare hybrid statement; the best TOP_ARMS of them are scored through the full
    pipeline under every pipeline setting (activation_share, semantic_signal), 3 seeds,
    and `choose` picks among those. `config`: the runtime.yaml whose values count as
    the configured ones (default ./runtime.yaml).
    """
    settings = load_settings(config, env={})
    providers = build_providers(settings.providers, settings.secrets, None, None)
    model = providers.embedder.model_name
    base = settings.recall.retrieval
    configured_arms, configured_k = _arms(base, model)
    configured = Trial(np.zeros(1), configured_arms.model_copy(update={"rrf_k": configured_k}),
                       base.activation_share, base.semantic_signal)
    async with AsyncExitStack() as stack:
        ev = Evaluation(settings, providers, stack)
        await ev.open(["tune"])
        bare = []
        for wv, wr, k in itertools.product(GRID_W_VECTOR, GRID_W_RECENCY, GRID_RRF_K):
            arms = ArmWeights(w_vector=wv, w_fulltext=1.0, w_recency=wr, rrf_k=k)
            score = float((await ev.per_question("tune", [
                lambda s, a=arms: s.hybrid(a, a.rrf_k, base.candidates)])).mean())
            print(f"bare hybrid  w_vector {wv:<4g} w_recency {wr:<4g} rrf_k {k:<3g}  recall@10 {score:.3f}",
                  flush=True)
            bare.append((score, arms))
        bare.sort(key=lambda r: -r[0])
        trials = []
        for _, arms in bare[:TOP_ARMS]:
            for share, signal in itertools.product(GRID_ACTIVATION_SHARE, SEMANTIC_SIGNALS):
                cfg = base.model_copy(update={"arms": {**base.arms, model: arms}, "activation_share": share,
                                              "semantic_signal": signal})
                trials.append(Trial(await ev.per_question("tune", ev.pipeline_runs(cfg)), arms, share, signal))
                print(f"pipeline  {trials[-1].line()}", flush=True)
        best = max(trials, key=lambda t: t.scores.mean())
        print(f"best on the tune half: {best.line()}")
        print(f"chosen (closest to the configured values within one paired SE of the best): {choose(trials, configured).line()}")
    await providers.aclose()


#: --context: context turns and full-text weights of a context word tried on the tune half.
GRID_CONTEXT_TURNS = (0, 1, 2, 3, 4)
GRID_W_CONTEXT = (0.25, 0.5, 0.75, 1.0)


async def tune_context() -> None:
    """Pick the conversation context's turns and weight on the tune conversations by recall@10
    (full-text arm, bare hybrid, pipeline at the configured weight), and measure the context in
    the vector as well as in full text. Report is never opened."""
    settings = load_settings(env={})
    providers = build_providers(settings.providers, settings.secrets, None, None)
    base = settings.recall.retrieval
    arms, k = _arms(base, providers.embedder.model_name)
    plans = [ContextPlan(n) for n in GRID_CONTEXT_TURNS] + [ContextPlan(CONTEXT_TURNS, in_vector=True)]
    for plan in plans:
        async with AsyncExitStack() as stack:
            ev = Evaluation(settings, providers, stack, plan)
            await ev.open(["tune"])
            label = f"turns {plan.turns}{' in the vector too' if plan.in_vector else ''}"
            vec = await ev.per_question("tune", [
                lambda s: s.hybrid(ArmWeights(w_vector=1, w_fulltext=0, w_recency=0), k, base.candidates)])
            print(f"{label:<28} vector arm  recall@10 {vec.mean():.3f}", flush=True)
            for wc in GRID_W_CONTEXT if plan.turns else (base.context_weight,):
                ft = await ev.per_question("tune", [lambda s, wc=wc: s.hybrid(
                    ArmWeights(w_vector=0, w_fulltext=1, w_recency=0), k, base.candidates, vector=False, w_context=wc)])
                bare = await ev.per_question("tune", [lambda s, wc=wc: s.hybrid(arms, k, base.candidates, w_context=wc)])
                cfg = base.model_copy(update={"context_weight": wc})
                pipe = await ev.per_question("tune", ev.pipeline_runs(cfg))
                print(f"{label:<28} w_context {wc:<4g}  full text {ft.mean():.3f}  bare hybrid {bare.mean():.3f}"
                      f"  pipeline {pipe.mean():.3f} (± {pipe.std(ddof=1) / np.sqrt(len(pipe)):.3f})", flush=True)
    await providers.aclose()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--context"]:
        asyncio.run(tune_context())
    elif sys.argv[1:2] == ["--tune"]:
        asyncio.run(tune(sys.argv[2] if len(sys.argv) > 2 else None))
    else:
        for row in asyncio.run(run(sys.argv[2] if sys.argv[1:2] == ["--config"] else None)):
            print(f"{row['name']}: {row['value']:.1f}" if isinstance(row["value"], float) else row)
