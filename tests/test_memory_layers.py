"""Layer 0 / Layer 1 (plan §2.4): file format, bootstrap, on-disk cache, re-embedding rules."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass

import numpy as np
import pytest

from src.errors import ConfigError, ProviderUnavailable
from src.recall.layers import LayerEmbeddings, cache_key, parse_layer
from tests.fakes import HashEmbedder

VALUES = [{"text": "Honesty over agreeableness.", "weight": 0.9},
          {"text": "Curiosity about how things work.", "weight": 0.6},
          {"text": "Care for the people I talk with.", "weight": 1}]
GOALS = [{"text": "Learn the user's projects.", "weight": 0.5}]


@dataclass
class DownEmbedder(HashEmbedder):
    down: bool = True

    async def embed(self, texts, task_type, titles=None):
        if self.down:
            raise ProviderUnavailable("embedding service down (503)", provider="fake")
        return await super().embed(texts, task_type, titles)


def _write(path, entries):
    path.write_text(json.dumps(entries), encoding="utf-8")


@pytest.fixture
def files(tmp_path):
    values, goals = tmp_path / "values.json", tmp_path / "goals.json"
    _write(values, VALUES)
    _write(goals, GOALS)
    return values, goals, tmp_path / "cache"


def _layers(files, embedder):
    values, goals, cache = files
    return LayerEmbeddings(embedder, values_path=values, goals_path=goals, cache_dir=cache)


async def test_missing_files_blank_files_and_empty_lists_are_the_bootstrap_state(tmp_path):
    embedder = HashEmbedder()
    layers = LayerEmbeddings(embedder, values_path=tmp_path / "nope.json",
                             goals_path=tmp_path / "goals.json", cache_dir=tmp_path / "cache")
    assert await layers.get_layer_embeddings(0) == []
    assert await layers.get_layer_embeddings(1) == []
    (tmp_path / "goals.json").write_text("  \n")
    assert await layers.get_layer_embeddings(1) == []
    (tmp_path / "goals.json").write_text("[]")
    assert await layers.get_layer_embeddings(1) == []
    assert embedder.calls == []
    assert not (tmp_path / "cache").exists()


async def test_entries_are_embedded_as_documents_titled_value_and_goal(files):
    embedder = HashEmbedder()
    layers = _layers(files, embedder)
    values = await layers.get_layer_embeddings(0)
    goals = await layers.get_layer_embeddings(1)
    assert [(t, w) for t, w, _ in values] == [
        ("Honesty over agreeableness.", 0.9), ("Curiosity about how things work.", 0.6),
        ("Care for the people I talk with.", 1.0)]
    assert [(t, w) for t, w, _ in goals] == [("Learn the user's projects.", 0.5)]
    assert [(c.texts, c.task_type, c.titles) for c in embedder.calls] == [
        ([v["text"] for v in VALUES], "RETRIEVAL_DOCUMENT", ["value"] * 3),
        (["Learn the user's projects."], "RETRIEVAL_DOCUMENT", ["goal"])]
    for _, _, vector in values + goals:
        assert vector.dtype == np.float32 and vector.shape == (768,)
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
    # a second call with nothing changed embeds nothing
    assert len(await layers.get_layer_embeddings(0)) == 3
    assert len(embedder.calls) == 2


async def test_cached_vector_equals_the_re_embedded_vector(files):
    await _layers(files, HashEmbedder()).get_layer_embeddings(0)
    fresh_embedder = HashEmbedder()
    cached = await _layers(files, fresh_embedder).get_layer_embeddings(0)  # a new process
    assert fresh_embedder.calls == []  # everything came from the disk cache
    re_embedded = await HashEmbedder().embed([v["text"] for v in VALUES], "RETRIEVAL_DOCUMENT",
                                             titles=["value"] * 3)
    for (_, _, vector), expected in zip(cached, re_embedded, strict=True):
        np.testing.assert_array_equal(vector, expected)


async def test_editing_one_entry_re_embeds_only_that_entry(files):
    values_path, _, cache = files
    embedder = HashEmbedder()
    layers = _layers(files, embedder)
    await layers.get_layer_embeddings(0)
    edited = [dict(v) for v in VALUES]
    edited[1]["text"] = "Curiosity about how minds work."
    edited[2]["weight"] = 0.3  # a weight change alone needs no new vector
    _write(values_path, edited)

    await layers.get_layer_embeddings(0)       # taken in the background
    await layers.refreshed()
    result = await layers.get_layer_embeddings(0)
    assert [(c.texts, c.titles) for c in embedder.calls[1:]] == [
        (["Curiosity about how minds work."], ["value"])]
    assert [(t, w) for t, w, _ in result] == [
        ("Honesty over agreeableness.", 0.9), ("Curiosity about how minds work.", 0.6),
        ("Care for the people I talk with.", 0.3)]
    # the cache holds exactly the live entries
    with np.load(cache / "layer0_values.npz") as npz:
        assert sorted(npz.files) == sorted(cache_key("fake-hash-768", e["text"]) for e in edited)


async def test_a_different_embed_model_re_embeds_everything(files):
    await _layers(files, HashEmbedder()).get_layer_embeddings(0)
    other = HashEmbedder(model_name="other-model-768")
    await _layers(files, other).get_layer_embeddings(0)
    assert [c.texts for c in other.calls] == [[v["text"] for v in VALUES]]
    same_again = HashEmbedder(model_name="other-model-768")
    await _layers(files, same_again).get_layer_embeddings(0)
    assert same_again.calls == []


async def test_model_switch_in_a_running_process_is_noticed(files):
    embedder = HashEmbedder()
    layers = _layers(files, embedder)
    await layers.get_layer_embeddings(1)
    embedder.model_name = "switched-768"
    await layers.get_layer_embeddings(1)
    assert [c.texts for c in embedder.calls] == [["Learn the user's projects."]] * 2


async def test_embedder_down_returns_the_cached_entries_and_retries_later(files, caplog):
    values_path, _, _ = files
    await _layers(files, HashEmbedder()).get_layer_embeddings(0)
    _write(values_path, VALUES + [{"text": "Patience with slow progress.", "weight": 0.4}])
    embedder = DownEmbedder()
    layers = _layers(files, embedder)
    with caplog.at_level(logging.WARNING, logger="src.recall.layers"):
        partial = await layers.get_layer_embeddings(0)
    assert [t for t, _, _ in partial] == [v["text"] for v in VALUES]
    assert caplog.messages == [
        "layer 0: 1 entries could not be embedded and are left out until the embedder "
        "answers: embedding service down (503)"]
    embedder.down = False
    full = await layers.get_layer_embeddings(0)
    assert [t for t, _, _ in full][-1] == "Patience with slow progress."
    assert [c.texts for c in embedder.calls] == [["Patience with slow progress."]]


async def test_a_damaged_cache_file_costs_a_re_embed_not_an_error(files):
    _, _, cache = files
    await _layers(files, HashEmbedder()).get_layer_embeddings(0)
    (cache / "layer0_values.npz").write_bytes(b"not a zip file")
    embedder = HashEmbedder()
    assert len(await _layers(files, embedder).get_layer_embeddings(0)) == 3
    assert len(embedder.calls) == 1


async def test_returned_vectors_cannot_corrupt_the_cache(files):
    layers = _layers(files, HashEmbedder())
    [(_, _, vector), *_] = await layers.get_layer_embeddings(0)
    with pytest.raises(ValueError):
        vector[0] = 5.0


async def test_unknown_layer_number_is_an_error(files):
    with pytest.raises(ValueError, match=r"^layer must be 0 \(values\) or 1 \(goals\), got 2$"):
        await _layers(files, HashEmbedder()).get_layer_embeddings(2)


@pytest.mark.parametrize(("raw", "message"), [
    ("{not json", "v.json: not valid JSON (line 1, column 2: Expecting property name enclosed in "
                  "double quotes); expected a list of {\"text\": …, \"weight\": …}"),
    ('{"text": "x", "weight": 1}',
     "v.json: expected a JSON list of {\"text\": …, \"weight\": …} entries, got dict"),
    ('["just a string"]', "v.json: entry 0: expected an object with \"text\" and \"weight\", got str"),
    ('[{"text": "a", "weight": 0.5}, {"weight": 0.5}]', "v.json: entry 1: \"text\" must be a non-empty string"),
    ('[{"text": "  ", "weight": 0.5}]', "v.json: entry 0: \"text\" must be a non-empty string"),
    ('[{"text": "a", "weight": 1.5}]', "v.json: entry 0: \"weight\" must be a number in [0, 1], got 1.5"),
    ('[{"text": "a", "weight": true}]', "v.json: entry 0: \"weight\" must be a number in [0, 1], got True"),
    ('[{"text": "a"}]', "v.json: entry 0: \"weight\" must be a number in [0, 1], got None"),
    ('[{"text": "a", "weight": 0.5, "wieght": 1}]',
     "v.json: entry 0: unknown key(s) 'wieght'; only \"text\" and \"weight\" are allowed"),
    ('[{"text": "a", "weight": 0.5}, {"text": "a", "weight": 0.1}]',
     "v.json: entry 1: the same text as entry 0; remove one of them"),
])
def test_malformed_layer_files_name_the_file_and_the_entry(raw, message):
    with pytest.raises(ConfigError) as info:
        parse_layer(raw, "v.json")
    assert str(info.value) == message


async def test_a_malformed_file_raises_config_error_through_the_api(files):
    values_path, _, _ = files
    values_path.write_text('[{"text": "a", "weight": -1}]')
    with pytest.raises(ConfigError) as info:
        await _layers(files, HashEmbedder()).get_layer_embeddings(0)
    assert str(info.value) == f"{values_path}: entry 0: \"weight\" must be a number in [0, 1], got -1"


def test_layer_texts_are_cleaned_and_stripped():
    [entry] = parse_layer('[{"text": "  keep\\u0000 going  ", "weight": 0}]', "v.json")
    assert (entry.text, entry.weight) == ("keep going", 0.0)


async def test_a_half_saved_file_while_running_keeps_the_last_good_version_and_says_so_once(files, caplog):
    values_path, _, _ = files
    _write(values_path, [{"text": "honesty matters", "weight": 0.9}])
    layers = _layers(files, HashEmbedder())
    good = await layers.get_layer_embeddings(0)
    values_path.write_text('[{"text": "honesty matters", "wei')          # an editor mid-save
    with caplog.at_level(logging.WARNING, logger="src.recall.layers"):
        for _ in range(50):                                               # fifty cycles
            kept = await layers.get_layer_embeddings(0)
            assert [(t, w) for t, w, _ in kept] == [("honesty matters", 0.9)]
            assert np.array_equal(kept[0][2], good[0][2])
        await layers.refreshed()
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"{values_path}: not valid JSON (line 1, column ")
    assert warnings[0].endswith("; keeping the last good version of layer 0 until the file is fixed")
    _write(values_path, [{"text": "curiosity", "weight": 0.5}])          # fixed: taken once embedded
    await layers.get_layer_embeddings(0)
    await layers.refreshed()
    assert [(t, w) for t, w, _ in await layers.get_layer_embeddings(0)] == [("curiosity", 0.5)]


@dataclass
class GatedEmbedder(HashEmbedder):
    """Embeds at once until `gate` is set, then waits for it to open (a slow, large layer)."""

    gate: asyncio.Event | None = None

    async def embed(self, texts, task_type, titles=None):
        if self.gate is not None:
            await self.gate.wait()
        return await super().embed(texts, task_type, titles)


async def test_an_edit_is_embedded_off_the_cycle_and_the_old_vectors_stay_until_it_is_ready(files):
    """Issue 26: a 5 MB layer file stalled one cycle 59 s, re-embedded inside the cycle."""
    values_path, _, _ = files
    embedder = GatedEmbedder()
    layers = _layers(files, embedder)
    old = await layers.get_layer_embeddings(0)
    embedder.gate = asyncio.Event()
    _write(values_path, VALUES + [{"text": "Patience with slow progress.", "weight": 0.4}])
    for _ in range(3):                                   # three cycles while the new entry embeds
        during = await asyncio.wait_for(layers.get_layer_embeddings(0), 2)
        assert [t for t, _, _ in during] == [t for t, _, _ in old]
        assert all(np.array_equal(a[2], b[2]) for a, b in zip(during, old, strict=True))
    embedder.gate.set()
    await layers.refreshed()
    new = await layers.get_layer_embeddings(0)
    assert [t for t, _, _ in new] == [v["text"] for v in VALUES] + ["Patience with slow progress."]
    assert [c.texts for c in embedder.calls[1:]] == [["Patience with slow progress."]]   # embedded once


async def test_a_small_file_is_read_on_the_loop_and_a_large_one_in_a_thread(files, monkeypatch):
    # read every cycle: a thread hand-off per read cost more than reading a few KB
    import src.recall.layers as layers_module
    threaded = []
    real = asyncio.to_thread

    async def to_thread(func, *args):
        if func is layers_module._read_layer_file:
            threaded.append(args)
        return await real(func, *args)

    monkeypatch.setattr(layers_module.asyncio, "to_thread", to_thread)
    values_path, _, _ = files
    layers = _layers(files, HashEmbedder())
    assert [t for t, _, _ in await layers.get_layer_embeddings(0)] == [v["text"] for v in VALUES]
    assert threaded == []
    values_path.write_text(json.dumps(VALUES) + " " * layers_module.SMALL_LAYER_FILE_BYTES, encoding="utf-8")
    assert [t for t, _, _ in await layers.get_layer_embeddings(0)] == [v["text"] for v in VALUES]
    assert threaded == [(values_path, 0)]
