"""Working memory's vector path (src/recall/working.py): a fact the user just said, not yet
flushed, asked for in other words.

    python -m bench working            # part of `make bench`

The labelled set bench/data/paraphrase_facts.jsonl (200 facts, each with a question sharing
no content word with it; split dev / report by id). For each question, its fact sits among
14 other facts of the same half (a buffer of what the user just said, drawn with a fixed
seed), and each offline embedder compares the question with the 15 lines:

- own ≥ floor: the share of questions whose own fact reaches the model's `working_floor`
  (src/recall/settings.py), so working memory offers it;
- other ≥ floor: the share of (question, other fact) pairs that pass the floor too;
- @1 / @3: the own fact first / in the first three of the buffer by cosine.

The floors were read off the dev half (the 95th percentile of "other"); report is the result.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from src.recall.settings import MINILM, WORDLLAMA, RetrievalSettings

DATA = Path(__file__).parent / "data" / "paraphrase_facts.jsonl"
BUFFER = 15


def _embedders() -> list:
    from src.providers.embed_minilm import MiniLmEmbedder
    from src.providers.embed_wordllama import WordLlamaEmbedder
    return [(MINILM, MiniLmEmbedder()), (WORDLLAMA, WordLlamaEmbedder())]


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


async def run() -> list[dict]:
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    settings, out = RetrievalSettings(), []
    for model, embedder in _embedders():
        floor = settings.arm_weights(model).working_floor
        for split in ("dev", "report"):
            half = [r for r in rows if r["split"] == split]
            facts = _unit(np.asarray(await embedder.embed([r["fact"] for r in half], "RETRIEVAL_DOCUMENT")))
            questions = _unit(np.asarray(await embedder.embed([r["question"] for r in half], "RETRIEVAL_QUERY")))
            cos = questions @ facts.T
            rng = random.Random(1)
            own_in, first, top3 = 0, 0, 0
            for i in range(len(half)):
                buffer = [i, *rng.sample([j for j in range(len(half)) if j != i], BUFFER - 1)]
                rank = sorted(buffer, key=lambda j: -cos[i, j]).index(i) + 1
                own_in += cos[i, i] >= floor
                first += rank == 1
                top3 += rank <= 3
            others = cos[~np.eye(len(half), dtype=bool)]
            n, name = len(half), f"{model.split('-')[0]} {split}"
            out += [{"name": f"{name}: own ≥ floor {floor}", "value": 100 * own_in / n, "unit": "%"},
                    {"name": f"{name}: other ≥ floor", "value": float(100 * (others >= floor).mean()), "unit": "%"},
                    {"name": f"{name}: own first of {BUFFER}", "value": 100 * first / n, "unit": "%"},
                    {"name": f"{name}: own in first 3 of {BUFFER}", "value": 100 * top3 / n, "unit": "%"}]
    return out
