"""`calibrate`: propose the current embed model's similarity thresholds from a sample of the store.

What it measures: `--sample` memories (default 200; a fixed pseudo-random choice per
`--seed`) are embedded as the novelty check embeds them (type prefix + content,
SEMANTIC_SIMILARITY), each with a lightly perturbed copy of itself (one word in five
dropped, case and punctuation changed), by the configured embedder and by a reference
model whose thresholds were measured (`--reference`: minilm, the default, or wordllama;
notes.md "Thresholds per embedder"). Pairs: each memory with its copy (near-duplicates)
and every two different memories (whatever the store holds: unrelated or on one topic).
Each of the reference's thresholds is carried to the new model by quantile matching on
those pairs (src/memory/calibration.py); the two distributions are printed on stderr.

What it prints on stdout: a runtime.yaml fragment with the new model's entry added to each
mapping keyed by embed model (the mapping's other entries kept, since a mapping written in
runtime.yaml replaces the shipped one): gates.exit.thresholds (confirming, novel,
contradicting), consolidation.thresholds (merge_overlap copied: it compares words, not
vectors), metacognition.escalation.reflection.min_similarity, bootstrap.relevant_similarity.

What it does not measure: task types (one embedding per text; a server has none), the
negation direction (opposition_*, learned elsewhere), relevance (core/peripheral are on
activation, not cosine). A store of a few dozen memories gives noisy values; a perturbed
copy is only a stand-in for the same fact said in other words.
"""

from __future__ import annotations

import argparse
import random

import yaml

from src.memory.calibration import Distribution, pair_cosines, perturbed, propose
from src.memory.session import Session
from src.providers.embed_minilm import MiniLmEmbedder
from src.providers.embed_wordllama import WordLlamaEmbedder
from src.providers.embedding import MEMORY_TYPE_PREFIXES, embed_for_novelty
from src.providers.protocols import Embedder
from src.providers.settings import EmbeddingSettings
from src.recall.store import EMBED_MAX_CHARS

#: A memory shorter than this is a greeting or a fragment: its copy says nothing of paraphrase.
MIN_CHARS = 20

#: One row per distinct content: a text stored twice is a pair at cosine 1 for every model,
#: which says nothing of either and lifts the top quantiles.
_SAMPLE = """
SELECT content, memory_type FROM (
    SELECT DISTINCT ON (md5(content)) left(content, $1::int) AS content, memory_type, id
    FROM memories
    WHERE length(content) >= $2::int AND memory_type = ANY($3::text[])
    ORDER BY md5(content), id
) AS distinct_contents
ORDER BY md5(id::text || $4::text)
LIMIT $5::int
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="propose the current embed model's similarity thresholds",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--sample", type=int, default=200, metavar="N", help="memories sampled (10..2000, default 200)")
    p.add_argument("--reference", choices=("minilm", "wordllama"), default="minilm",
                   help="the model whose measured thresholds are carried over (default minilm)")
    p.add_argument("--seed", type=int, default=0, help="which sample and which words are dropped")
    p.set_defaults(run=run)


def reference_embedder(name: str, settings: EmbeddingSettings) -> Embedder:
    """The reference model, run in-process (tests replace this function)."""
    if name == "wordllama":
        return WordLlamaEmbedder(config=settings.wordllama_config, dim=settings.wordllama_dim,
                                 dimensions=settings.dimensions, max_tokens=settings.wordllama_max_tokens)
    return MiniLmEmbedder(dimensions=settings.dimensions)


async def _distribution(embedder: Embedder, contents: list[str], copies: list[str], types: list[str]) -> Distribution:
    originals = await embed_for_novelty(embedder, contents, types)
    perturbed_rows = await embed_for_novelty(embedder, copies, types)
    return Distribution(*pair_cosines(originals, perturbed_rows))


def reference_values(settings, model: str) -> dict[str, dict[str, float]]:
    """The reference model's cosine thresholds, grouped by the setting they come from."""
    gate = settings.gates.exit.thresholds_for(model)
    merge = settings.consolidation.thresholds_for(model)
    return {"gates": {"confirming": gate.confirming, "novel": gate.novel, "contradicting": gate.contradicting},
            "consolidation": {"merge": merge.merge, "theme": merge.theme,
                              "contradiction_pair": merge.contradiction_pair,
                              "insight_citation": merge.insight_citation},
            "floors": {"reflection": settings.metacognition.escalation.reflection.floor(model),
                       "relevant": settings.bootstrap.relevant_floor(model)}}


def fragment(settings, model: str, proposed: dict[str, dict[str, float]]) -> dict:
    """The runtime.yaml keys to set: each mapping keyed by embed model, the new entry added."""
    gates = {k: v.model_dump(exclude_defaults=True) for k, v in settings.gates.exit.thresholds.items()}
    merges = {k: v.model_dump(exclude_defaults=True) for k, v in settings.consolidation.thresholds.items()}
    gates[model] = proposed["gates"]
    overlap = settings.consolidation.thresholds_for(model).merge_overlap
    merges[model] = {**proposed["consolidation"], "merge_overlap": overlap}
    reflection = dict(settings.metacognition.escalation.reflection.min_similarity)
    reflection[model] = proposed["floors"]["reflection"]
    relevant = dict(settings.bootstrap.relevant_similarity)
    relevant[model] = proposed["floors"]["relevant"]
    return {"gates": {"exit": {"thresholds": gates}},
            "consolidation": {"thresholds": merges},
            "metacognition": {"escalation": {"reflection": {"min_similarity": reflection}}},
            "bootstrap": {"relevant_similarity": relevant}}


async def run(args: argparse.Namespace, s: Session) -> int:
    if not 10 <= args.sample <= 2000:
        s.err.write("calibrate: --sample must be in 10..2000\n")
        return 2
    embedder = s.providers.embedder
    reference = reference_embedder(args.reference, s.settings.providers.embeddings)
    if reference.model_name == embedder.model_name:
        s.err.write(f"calibrate: the configured embedder is the reference ({embedder.model_name}); its "
                    "thresholds are the measured ones\n")
        return 2
    rows = await s.pool.fetch(_SAMPLE, EMBED_MAX_CHARS, MIN_CHARS, list(MEMORY_TYPE_PREFIXES), str(args.seed),
                              args.sample)
    if len(rows) < 10:
        s.err.write(f"calibrate: {len(rows)} memories of at least {MIN_CHARS} characters; 10 are needed\n")
        return 1
    rng = random.Random(args.seed)
    contents, types = [r["content"] for r in rows], [r["memory_type"] for r in rows]
    copies = [perturbed(c, rng) for c in contents]
    mine = await _distribution(embedder, contents, copies, types)
    theirs = await _distribution(reference, contents, copies, types)
    values = reference_values(s.settings, reference.model_name)
    proposed = {group: propose(v, theirs, mine) for group, v in values.items()}
    s.err.write(f"calibrated on {len(rows)} memories ({len(mine.other)} pairs of different memories)\n"
                f"{embedder.model_name}: {mine.summary()}\n{reference.model_name}: {theirs.summary()}\n")
    s.out.write(f"# thresholds for {embedder.model_name}, carried from {reference.model_name} by quantile "
                f"matching on {len(rows)} memories of this store (python -m src.memory calibrate)\n")
    s.out.write(yaml.safe_dump(fragment(s.settings, embedder.model_name, proposed), sort_keys=False))
    return 0
