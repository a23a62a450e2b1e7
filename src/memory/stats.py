"""`stats`: what is in the store.

Counts by memory type and by source tag; the weight distribution (centers
alpha / (alpha + beta): mean and deciles; contested = alpha > 5 and beta > 5,
uninformed = alpha < 2 and beta < 2, as src/weights/stochastic defines them;
dormant = center below retrieval.dormant_center); the embed models present (and
rows without a vector); table sizes; the HNSW index state. One statement per
section, all read-only.
"""

from __future__ import annotations

import argparse
import json

from src.memory.console import printable
from src.memory.session import Session
from src.recall import hnsw
from src.weights.stochastic import CONTESTED_MIN, UNINFORMED_MAX

_BY_TYPE = "SELECT memory_type AS key, count(*) AS n FROM memories GROUP BY 1 ORDER BY 2 DESC, 1"
_BY_SOURCE = "SELECT source_tag AS key, count(*) AS n FROM memories GROUP BY 1 ORDER BY 2 DESC, 1"
_BY_MODEL = """SELECT COALESCE(embed_model, '(no embedding)') AS key, count(*) AS n
               FROM memories GROUP BY 1 ORDER BY 2 DESC, 1"""
_WEIGHTS = """
SELECT count(*) AS n,
       avg(c) AS mean,
       percentile_cont(ARRAY[0.1, 0.5, 0.9]) WITHIN GROUP (ORDER BY c) AS deciles,
       count(*) FILTER (WHERE a > $1 AND b > $1) AS contested,
       count(*) FILTER (WHERE a < $2 AND b < $2) AS uninformed,
       count(*) FILTER (WHERE c < $3 AND NOT immutable) AS dormant,
       count(*) FILTER (WHERE immutable) AS immutable
FROM (SELECT depth_weight_alpha AS a, depth_weight_beta AS b, immutable,
             depth_weight_alpha / (depth_weight_alpha + depth_weight_beta) AS c
      FROM memories) w
"""
_SIZES = """
SELECT c.relname AS key, pg_total_relation_size(c.oid) AS bytes, c.reltuples::bigint AS rows_estimate
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind = 'r'
ORDER BY 2 DESC, 1
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stats", help="counts, weight distribution, embed models, table sizes",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")
    p.set_defaults(run=run)


def _size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


async def collect(s: Session) -> dict:
    """Every figure `stats` prints, as one dict."""
    db = s.pool
    w = await db.fetchrow(_WEIGHTS, CONTESTED_MIN, UNINFORMED_MAX, s.settings.recall.retrieval.dormant_center)
    deciles = list(w["deciles"]) if w["deciles"] is not None else [None, None, None]
    return {
        "memories": w["n"],
        "by_type": {r["key"]: r["n"] for r in await db.fetch(_BY_TYPE)},
        "by_source": {r["key"]: r["n"] for r in await db.fetch(_BY_SOURCE)},
        "weights": {"center_mean": None if w["mean"] is None else round(w["mean"], 4),
                    "center_p10": deciles[0], "center_p50": deciles[1], "center_p90": deciles[2],
                    "contested": w["contested"], "uninformed": w["uninformed"],
                    "dormant": w["dormant"], "immutable": w["immutable"]},
        "embed_models": {r["key"]: r["n"] for r in await db.fetch(_BY_MODEL)},
        "current_embed_model": s.providers.embedder.model_name,
        "hnsw_index": await hnsw.index_state(db),
        "tables": {r["key"]: {"bytes": r["bytes"], "rows_estimate": max(r["rows_estimate"], 0)}
                   for r in await db.fetch(_SIZES)},
    }


def format_text(st: dict) -> str:
    w = st["weights"]

    def counts(d: dict) -> str:
        return ", ".join(f"{printable(k)} {v}" for k, v in d.items()) or "none"

    def c(v: float | None) -> str:
        return "—" if v is None else f"{v:.3f}"

    lines = [
        f"memories: {st['memories']}",
        f"by type: {counts(st['by_type'])}",
        f"by source: {counts(st['by_source'])}",
        f"centers: mean {c(w['center_mean'])}, p10 {c(w['center_p10'])}, median {c(w['center_p50'])}, "
        f"p90 {c(w['center_p90'])}",
        f"contested (alpha > {CONTESTED_MIN:g} and beta > {CONTESTED_MIN:g}): {w['contested']}; "
        f"uninformed (alpha < {UNINFORMED_MAX:g} and beta < {UNINFORMED_MAX:g}): {w['uninformed']}; "
        f"dormant: {w['dormant']}; immutable: {w['immutable']}",
        f"embed models: {counts(st['embed_models'])} (current: {printable(st['current_embed_model'])})",
        f"HNSW index: {st['hnsw_index']}"
        + ("" if st["hnsw_index"] == "valid" else " — the next `import` rebuilds it"),
        "tables: " + ", ".join(f"{k} {_size(v['bytes'])}" for k, v in st["tables"].items()),
    ]
    return "\n".join(lines)


async def run(args: argparse.Namespace, s: Session) -> int:
    st = await collect(s)
    s.out.write((json.dumps(st) if args.json else format_text(st)) + "\n")
    return 0
