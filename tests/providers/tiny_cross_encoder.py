"""A tiny ONNX cross-encoder in FlashRank's folder layout, built from scratch (no download).

    <cache_dir>/<model>/<model file>.onnx   graph: (input_ids, attention_mask, token_type_ids) -> logits (b, 1)
    <cache_dir>/<model>/tokenizer.json      WordLevel over VOCAB, BERT-style pair template
    <cache_dir>/<model>/config.json, tokenizer_config.json, special_tokens_map.json

The logit is SCALE · (mean query-token embedding · mean passage-token embedding) + BIAS,
with token type 0 marking the query and 1 the passage. Word embeddings are random unit
vectors from a fixed seed, so a passage that repeats the query's words scores highest,
unrelated passages score near sigmoid(BIAS), and everything is deterministic.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
WORDS = (
    "the a an of to in on and or is are was be it this that with for as at by from my your "
    "cat cats dog dogs sat mat rug sleeps barks runs park garden house kitchen window "
    "paris france capital city river tower london england rain weather sunny cold warm "
    "coffee tea morning evening breakfast dinner cook recipe bread soup python code bug test "
    "database postgres vector memory memories remember forget user prefers likes dislikes "
    "music jazz piano guitar book books read reading train trip travel mountain sea beach "
    "what where when who why how does do did which favourite color blue red green yellow"
).split()
VOCAB = SPECIALS + WORDS
DIM = 16
SCALE = 10.0
BIAS = -3.0
SEED = 20240611


def _embeddings() -> np.ndarray:
    rng = np.random.default_rng(SEED)
    table = rng.normal(size=(len(VOCAB), DIM)).astype(np.float32)
    table /= np.linalg.norm(table, axis=1, keepdims=True)
    table[: len(SPECIALS)] = 0.0  # special and unknown tokens carry no meaning
    return table


def _graph_model():
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    ints = TensorProto.INT64
    inputs = [helper.make_tensor_value_info(n, ints, ["batch", "seq"])
              for n in ("input_ids", "attention_mask", "token_type_ids")]
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])
    init = [
        numpy_helper.from_array(_embeddings(), "E"),
        numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
        numpy_helper.from_array(np.array(1e-6, dtype=np.float32), "eps"),
        numpy_helper.from_array(np.array(SCALE, dtype=np.float32), "scale"),
        numpy_helper.from_array(np.array(BIAS, dtype=np.float32), "bias"),
    ]
    n = helper.make_node
    nodes = [
        n("Gather", ["E", "input_ids"], ["emb"], axis=0),                      # (b, L, d)
        n("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),          # (b, L)
        n("Cast", ["token_type_ids"], ["types"], to=TensorProto.FLOAT),
        n("Mul", ["mask", "types"], ["pmask"]),                                 # passage tokens
        n("Sub", ["mask", "pmask"], ["qmask"]),                                 # query tokens
    ]
    for side in ("p", "q"):
        nodes += [
            n("Unsqueeze", [f"{side}mask", "axis2"], [f"{side}mask3"]),
            n("Mul", ["emb", f"{side}mask3"], [f"{side}emb"]),
            n("ReduceSum", [f"{side}emb", "axis1"], [f"{side}sum"], keepdims=0),     # (b, d)
            n("ReduceSum", [f"{side}mask", "axis1"], [f"{side}count"], keepdims=1),  # (b, 1)
            n("Max", [f"{side}count", "eps"], [f"{side}safe"]),
            n("Div", [f"{side}sum", f"{side}safe"], [f"{side}mean"]),
        ]
    nodes += [
        n("Mul", ["qmean", "pmean"], ["prod"]),
        n("ReduceSum", ["prod", "axis1"], ["dot"], keepdims=1),                 # (b, 1)
        n("Mul", ["dot", "scale"], ["scaled"]),
        n("Add", ["scaled", "bias"], ["logits"]),
    ]
    graph = helper.make_graph(nodes, "tiny_cross_encoder", inputs, [output], init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="moltbot-tests")
    model.ir_version = 8  # readable by every onnxruntime of the last few years
    onnx.checker.check_model(model)
    return model


def _tokenizer():
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordLevel

    vocab = {word: i for i, word in enumerate(VOCAB)}
    tok = Tokenizer(WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    return tok


def build_tiny_cross_encoder(cache_dir: Path, model: str = "ms-marco-MiniLM-L-12-v2") -> Path:
    """Write the model folder FlashRank expects for `model` under `cache_dir`; return it."""
    import onnx
    from flashrank.Config import model_file_map

    folder = Path(cache_dir) / model
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(_graph_model(), str(folder / model_file_map[model]))
    _tokenizer().save(str(folder / "tokenizer.json"))
    (folder / "config.json").write_text(json.dumps({"pad_token_id": 0}))
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"model_max_length": 512, "pad_token": "[PAD]"}))
    (folder / "special_tokens_map.json").write_text(json.dumps(
        {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]"}))
    return folder


def expected_score(query: str, passage: str) -> float:
    """The score FlashRank reports for the pair: sigmoid of the graph's logit, in numpy."""
    enc = _tokenizer().encode(query, passage)
    table = _embeddings()
    emb = table[np.array(enc.ids)]
    types = np.array(enc.type_ids, dtype=np.float32)
    q = (emb * (1 - types)[:, None]).sum(axis=0) / max((1 - types).sum(), 1e-6)
    p = (emb * types[:, None]).sum(axis=0) / max(types.sum(), 1e-6)
    logit = SCALE * float(np.dot(q, p)) + BIAS
    return 1.0 / (1.0 + float(np.exp(-logit)))
