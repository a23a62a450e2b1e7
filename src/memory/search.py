"""`search "query"`: the full recall pipeline, read-only unless `--mutate`.

Prints every result with each stage's numbers: hybrid search (rank and score per
arm, cosine, RRF, recency, fused score), ACT-R (B, S, P, ε, A, P(retrieve)), the
five relevance components with this call's Dirichlet blend, the weighted score,
the rerank score and the final score, and when each memory was said (issue 37: the
model's words for its date, absolute and relative, and when it was stored where that
is more than a day apart; src/recall/dated.py). `--json` prints the same as one object,
each result with `created_at`, `event_time` and `said`, the words the model reads of its
date; `--batch FILE` runs one query per line of FILE in one process and prints one JSON
line per query, in order.

Read-only means no write at all: no weight change, no access bookkeeping, no
co-access (Retriever.retrieve(mutate=False)); the service may run meanwhile.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from src.db.deferred import run_now
from src.memory.console import excerpt, printable
from src.memory.session import Session
from src.recall.dated import said_words
from src.recall.explain import dated_json, result_json
from src.recall.retrieval import Retrieval, Retriever
from src.recall.when import said_when
from src.recall.working import NOT_CONSOLIDATED
from src.weights.approval import ApprovalLine
from src.weights.safety import Safety


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search", help="recall memories for a query, with every score component",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("query", nargs="?", help="the question (omit with --batch)")
    p.add_argument("--k", type=int, default=10, help="memories to return (default 10)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")
    p.add_argument("--batch", type=Path, metavar="FILE",
                   help="one query per line; prints one JSON line per query, in order")
    p.add_argument("--mutate", action="store_true",
                   help="apply retrieval's effects (reinforce, near-miss suppression, access "
                        "bookkeeping, co-access) as the mind would; default: read-only")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the random generator (Dirichlet blend, noise) for repeatable output")
    p.set_defaults(run=run)


def plain_metadata(metadata: dict, prefix: str = "") -> str:
    """`key value; other.key value` — a memory's metadata as text, not JSON (issue 26); nested
    objects by dotted keys, lists joined with commas."""
    parts = []
    for key, value in metadata.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            parts.append(plain_metadata(value, f"{name}.") or f"{name} (empty)")
        elif isinstance(value, list):
            parts.append(f"{name} " + ", ".join(map(str, value)) if value else f"{name} (none)")
        else:
            parts.append(f"{name} {value}")
    return printable("; ".join(parts)) if not prefix else "; ".join(parts)


def format_text(result: Retrieval, now: datetime) -> str:
    """The human-readable form: one block per memory, dated relative to `now`."""
    lines = [f"query: {excerpt(result.query, 200)}",
             "blend: " + "  ".join(f"{k} {v:.3f}" for k, v in result.blend.items())]
    if result.rerank_skipped_reason:
        lines.append(f"rerank skipped: {printable(result.rerank_skipped_reason)}")
    lines += [f"degraded: {printable(d)}" for d in result.degraded]
    for w in result.working:
        cosine = "" if w.cosine is None else f", cos {w.cosine:.4f}"
        lines.append(f"*. scratch #{w.scratch_id}  [{NOT_CONSOLIDATED}, {printable(w.source_tag)}, "
                     f"ts_rank {w.fts_score:.4f}{cosine}]  said {said_when(w.created_at, now)}")
        lines.append(f"   content: {excerpt(w.content)}")
    if not result.memories:
        lines.append("nothing recalled")
    for n, r in enumerate(result.memories, start=1):
        j = result_json(r)
        se, ar = j["search"], j["act_r"]
        vec = f"#{se['vector_rank']} cos {se['cosine']}" if se["vector_rank"] else "—"
        fts = f"#{se['fulltext_rank']} idf {se['fulltext_score']}" if se["fulltext_rank"] else "—"
        comps = "  ".join(f"{c} {v}" for c, v in j["relevance"]["components"].items())
        lines += [
            f"{n}. #{r.id}  final {r.final:.4f}  [{r.hit.memory_type}, {printable(r.hit.source_tag)}, "
            f"center {j['center']}]  said {said_words(r.hit.event_time, r.hit.created_at, now)}",
            f"   search: score {se['score']}  rrf {se['rrf']}  vector {vec}  full-text {fts}  "
            f"own {'#' + str(se['own_rank']) if se['own_rank'] else '—'}  recency {se['recency']}",
            f"   act-r: B {ar['B']}  S {ar['S']}  P {ar['P']}  ε {ar['noise']}  A {ar['A']}  "
            f"P(retrieve) {ar['p_retrieve']}",
            f"   relevance {j['relevance']['value']} from {comps}",
            f"   weighted {j['weighted']}  rerank {j['rerank'] if j['rerank'] is not None else '—'}",
            f"   content: {excerpt(r.hit.content)}",
            f"   metadata: {excerpt(plain_metadata(r.hit.metadata), 200)}",
        ]
    return "\n".join(lines)


async def run(args: argparse.Namespace, s: Session) -> int:
    if (args.query is None) == (args.batch is None):
        s.err.write('search: give either a query or --batch FILE (search "what did I plan?")\n')
        return 2
    if args.k < 1:
        s.err.write("search: --k must be at least 1\n")
        return 2
    cfg = s.settings.recall.retrieval
    # --mutate applies everything now: no light ticker runs in the CLI to apply queued near misses
    cfg = cfg.model_copy(update={"keep": args.k, "limit": max(cfg.limit, args.k), "near_miss_deferred": False})
    retriever = Retriever(s.pool, s.providers.embedder, s.providers.reranker,
                          Safety(s.settings.weights.safety,
                                 approval=ApprovalLine.of(s.settings.consolidation.evolution.promotion)), cfg)
    rng = np.random.default_rng(args.seed)
    now = datetime.now(UTC)          # one clock for every date this command prints
    if args.batch is not None:
        if not args.batch.is_file():
            s.err.write(f"search: {printable(str(args.batch))}: no such file\n")
            return 1
        with args.batch.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                # a blank line still gets its (empty) answer: output line n is query line n
                query = line.rstrip("\r\n")
                result = await retriever.retrieve(query, rng=rng, mutate=args.mutate)
                await run_now(result.writes)      # --mutate: the bookkeeping, here and now
                s.out.write(json.dumps(dated_json(result, now), ensure_ascii=False) + "\n")
        return 0
    result = await retriever.retrieve(args.query, rng=rng, mutate=args.mutate)
    await run_now(result.writes)
    if args.json:
        s.out.write(json.dumps(dated_json(result, now), ensure_ascii=False) + "\n")
    else:
        s.out.write(format_text(result, now) + "\n")
    return 0
