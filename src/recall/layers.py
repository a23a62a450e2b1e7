"""Layer 0 (values and beliefs) and Layer 1 (goals), embedded and cached (plan §2.4).

The layers are JSON files an operator edits by hand. Each file is a list of entries:

    [
      {"text": "Honesty matters more than being agreeable.", "weight": 0.9},
      {"text": "Curiosity about how things work.", "weight": 0.6}
    ]

`text` is a non-empty string (unique within the file); `weight` is a number in [0, 1],
how central the entry is. No other keys are accepted, so a misspelt key is reported
instead of silently ignored. A missing file, a blank file or `[]` is the bootstrap
state: the layer is empty and callers get `[]` (downstream handles it). Anything
else that is wrong raises ConfigError naming the file and the entry.

Vectors come from the embedder with RETRIEVAL_DOCUMENT and title "value" / "goal".
They are cached in `<cache_dir>/layer0_values.npz` and `layer1_goals.npz`, keyed by
sha256(embed model name + text): editing one entry re-embeds only that entry, and a
different embed model re-embeds everything. Each cache file holds exactly the
entries of the current file, so it never grows with edits. The files are re-read on
every call (in a thread) and compared with what was loaded, so an edit is picked up
without a restart; mtimes are too coarse to tell two quick edits apart.

An edit made while running is parsed and embedded in the background, and until the new
version is ready callers get the last good one: done inside the caller, a large layer
file stalled one cognitive cycle far past the cycle's deadline (issue 26; measured:
notes.md). Only the first load (nothing to fall back on) and an embed model switch (old
vectors cannot be compared with the new model's) are done in the call.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import logging
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from src.errors import ConfigError, ProviderError
from src.providers.protocols import Embedder
from src.text import clean_text

log = logging.getLogger(__name__)

LAYER_TITLES: dict[int, str] = {0: "value", 1: "goal"}
_CACHE_FILES: dict[int, str] = {0: "layer0_values.npz", 1: "layer1_goals.npz"}

LayerVector = tuple[str, float, np.ndarray]


@dataclass(frozen=True)
class LayerEntry:
    text: str
    weight: float


def parse_layer(raw: str, path: Path | str) -> list[LayerEntry]:
    """Validate a layer file's text; ConfigError names the file and the entry at fault."""
    if not raw.strip():
        return []
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: "
                          f"{exc.msg}); expected a list of {{\"text\": …, \"weight\": …}}") from exc
    if not isinstance(data, list):
        raise ConfigError(f"{path}: expected a JSON list of {{\"text\": …, \"weight\": …}} "
                          f"entries, got {type(data).__name__}")
    entries: list[LayerEntry] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(data):
        where = f"{path}: entry {i}"
        if not isinstance(item, dict):
            raise ConfigError(f"{where}: expected an object with \"text\" and \"weight\", "
                              f"got {type(item).__name__}")
        unknown = sorted(set(item) - {"text", "weight"})
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                              "only \"text\" and \"weight\" are allowed")
        text = item.get("text")
        if not isinstance(text, str) or clean_text(text).empty:
            raise ConfigError(f"{where}: \"text\" must be a non-empty string")
        text = clean_text(text).text.strip()
        weight = item.get("weight")
        if (isinstance(weight, bool) or not isinstance(weight, int | float)
                or not math.isfinite(weight) or not 0.0 <= weight <= 1.0):
            raise ConfigError(f"{where}: \"weight\" must be a number in [0, 1], got {weight!r}")
        if text in seen:
            raise ConfigError(f"{where}: the same text as entry {seen[text]}; remove one of them")
        seen[text] = i
        entries.append(LayerEntry(text, float(weight)))
    return entries


def cache_key(model_name: str, text: str) -> str:
    """The cache key of one entry: a new text or a new embed model means a new vector."""
    return hashlib.sha256(f"{model_name}\x00{text}".encode()).hexdigest()


def _read_cache(path: Path) -> dict[str, np.ndarray]:
    if not path.exists():
        return {}
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {key: npz[key] for key in npz.files}
    except (OSError, ValueError, KeyError) as exc:
        # a damaged cache only costs a re-embed; it must not stop the agent
        log.warning("ignoring unreadable layer cache %s: %s", path, exc)
        return {}


def _write_cache(path: Path, vectors: dict[str, np.ndarray]) -> None:
    """Atomic replace: a crash mid-write leaves the old cache, never half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    np.savez(buffer, **vectors)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(buffer.getvalue())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_layer_file(path: Path, layer: int) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the layer {layer} file: {exc}") from exc


#: A layer file up to this size is read on the event loop: from the page cache that costs
#: less than a worker thread's hand-off, and the files are read every cycle (twice:
#: recall's S_i and the gut). A larger one is read in a thread.
SMALL_LAYER_FILE_BYTES = 64 * 1024


async def _read_layer(path: Path, layer: int) -> str:
    raw = _read_small_layer_file(path, layer)
    return raw if raw is not None else await asyncio.to_thread(_read_layer_file, path, layer)


def _read_small_layer_file(path: Path, layer: int) -> str | None:
    """The file's text when it is small ("" when missing); None when it is large or cannot
    be sized (the read in a thread says why, with the path)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return ""
    except OSError:
        return None
    return _read_layer_file(path, layer) if size <= SMALL_LAYER_FILE_BYTES else None


@dataclass
class _Loaded:
    raw: str
    model_name: str
    vectors: list[LayerVector]


class LayerEmbeddings:
    """The embedded layers, kept in memory and on disk; see the module docstring."""

    def __init__(self, embedder: Embedder, *, values_path: Path | str, goals_path: Path | str,
                 cache_dir: Path | str):
        self.embedder = embedder
        self.paths = {0: Path(values_path), 1: Path(goals_path)}
        self.cache_dir = Path(cache_dir)
        self._loaded: dict[int, _Loaded] = {}
        # per layer, the file text last refused (None: unreadable) and why: said once, not re-parsed
        self._rejected: dict[int, tuple[str | None, str]] = {}
        self._lock = asyncio.Lock()             # one load at a time
        self._refreshing: dict[int, asyncio.Task] = {}

    def cache_path(self, layer: int) -> Path:
        return self.cache_dir / _CACHE_FILES[layer]

    async def get_layer_embeddings(self, layer: int) -> list[LayerVector]:
        """[(text, weight, unit vector float32[768])] for layer 0 (values) or 1 (goals).

        Cheap when nothing changed (the file is re-read and compared). A changed file is
        taken in the background (module docstring); a bad edit keeps the last good
        version, said once. If the embedder fails, the cached entries are returned, a
        warning is logged and the next call retries.
        """
        if layer not in LAYER_TITLES:
            raise ValueError(f"layer must be 0 (values) or 1 (goals), got {layer!r}")
        model = self.embedder.model_name
        loaded = self._loaded.get(layer)
        try:
            raw = await _read_layer(self.paths[layer], layer)
        except ConfigError as exc:
            if loaded is None:      # nothing good to fall back on (start-up): say so and stop
                raise
            self._refuse(layer, None, exc)
            return list(loaded.vectors)
        if loaded is not None and loaded.raw == raw and loaded.model_name == model:
            self._rejected.pop(layer, None)         # the good version is back: a new fault is said again
            return list(loaded.vectors)
        if loaded is None or loaded.model_name != model:
            async with self._lock:
                try:
                    return await self._refresh(layer, raw, model)
                except ConfigError as exc:
                    if loaded is None:
                        raise
                    self._refuse(layer, raw, exc)
                    return list(loaded.vectors)
        if self._rejected.get(layer, (None, ""))[0] != raw:
            self._start_refresh(layer, raw, model)
        return list(loaded.vectors)

    async def refreshed(self) -> None:
        """Wait until the background refreshes started so far are done (tests; a caller that
        must see an edit at once)."""
        tasks = [t for t in self._refreshing.values() if not t.done()]
        if tasks:
            await asyncio.wait(tasks)

    def _start_refresh(self, layer: int, raw: str, model: str) -> None:
        """Take `raw` in the background, unless a refresh of the layer is under way (the next
        call after it compares again)."""
        running = self._refreshing.get(layer)
        if running is None or running.done():
            self._refreshing[layer] = asyncio.create_task(self._refresh_in_background(layer, raw, model),
                                                          name=f"layer-{layer}-refresh")

    async def _refresh_in_background(self, layer: int, raw: str, model: str) -> None:
        try:
            async with self._lock:
                await self._refresh(layer, raw, model)
        except ConfigError as exc:
            self._refuse(layer, raw, exc)
        except Exception:  # a background task's error would go unseen; the old version stays
            log.exception("layer %d: the edited file could not be taken; keeping the last good version", layer)

    async def _refresh(self, layer: int, raw: str, model: str) -> list[LayerVector]:
        """Parse and embed `raw`; it becomes the loaded version when every entry has a vector."""
        entries = await asyncio.to_thread(parse_layer, raw, self.paths[layer])
        self._rejected.pop(layer, None)
        vectors, complete = await self._load(layer, entries, model)
        if complete:
            self._loaded[layer] = _Loaded(raw, model, vectors)
        return list(vectors)

    def _refuse(self, layer: int, raw: str | None, exc: ConfigError) -> None:
        """An edit in progress (half-saved file) keeps the last good version: said once per
        bad content, not once per cycle."""
        if self._rejected.get(layer, (None, ""))[1] != str(exc):
            log.warning("%s; keeping the last good version of layer %d until the file is fixed", exc, layer)
        self._rejected[layer] = (raw, str(exc))

    async def _load(self, layer: int, entries: list[LayerEntry],
                    model: str) -> tuple[list[LayerVector], bool]:
        cache_path = self.cache_path(layer)
        cached = await asyncio.to_thread(_read_cache, cache_path)
        on_disk = set(cached)
        keys = [cache_key(model, e.text) for e in entries]
        dims = self.embedder.dimensions
        missing = [i for i, k in enumerate(keys)
                   if k not in cached or cached[k].shape != (dims,)]
        complete = True
        if missing:
            title = LAYER_TITLES[layer]
            try:
                fresh = await self.embedder.embed([entries[i].text for i in missing],
                                                  "RETRIEVAL_DOCUMENT", titles=[title] * len(missing))
                for i, vector in zip(missing, np.asarray(fresh, dtype=np.float32), strict=True):
                    cached[keys[i]] = vector
                log.info("embedded %d of %d layer %d entries with %s", len(missing), len(entries),
                         layer, model)
            except ProviderError as exc:
                complete = False
                log.warning("layer %d: %d entries could not be embedded and are left out until "
                            "the embedder answers: %s", layer, len(missing), exc)
        live = {k: cached[k] for k in keys if k in cached}
        if complete and (missing or on_disk != set(live)):
            await asyncio.to_thread(_write_cache, cache_path, live)
        out: list[LayerVector] = []
        for entry, key in zip(entries, keys, strict=True):
            if key in live:
                vector = np.array(live[key], dtype=np.float32)
                vector.setflags(write=False)
                out.append((entry.text, entry.weight, vector))
        return out, complete


async def identity_vectors(layers: LayerEmbeddings) -> tuple[list[tuple[np.ndarray, float]], list[np.ndarray]]:
    """(values and goals as (vector, weight) for ACT-R's S_i, the goal vectors for salience).

    Cheap enough per cycle: the files are read and compared, and an edit is embedded in
    the background (the last good vectors meanwhile); with the embedder down the cached
    vectors are returned.
    """
    values = await layers.get_layer_embeddings(0)
    goals = await layers.get_layer_embeddings(1)
    return [(v, w) for _, w, v in values + goals], [v for _, _, v in goals]
