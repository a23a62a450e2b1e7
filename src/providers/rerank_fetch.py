"""Fetch the FlashRank model once, where there is network access (`make models`, the Docker build).

At run time the reranker never downloads (rerank_flashrank.py): a service that reached
the network mid-conversation would stall a turn, and offline it would fail. So the one
download is an explicit step, and it is whole or absent: FlashRank writes into a
temporary folder beside the cache, the files are checked, and only then is the folder
renamed into place; an interrupted fetch leaves nothing the service would half-load.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from src.providers.rerank_flashrank import flashrank_missing, flashrank_model_file

#: Downloads `model` into `<folder>/<model>/` (FlashRank's layout).
Download = Callable[[str, Path], None]

#: Where the start-up line points a user whose reranker is missing.
FETCH_HINT = "`make models` fetches it once, where there is network access"


def flashrank_download(model: str, folder: Path) -> None:
    """FlashRank's own download (the same call the service makes later, so it also loads)."""
    from flashrank import Ranker

    Ranker(model_name=model, cache_dir=str(folder), log_level="WARNING")


def _size_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1e6


def fetch_flashrank(cache_dir: str | Path, model: str, *, download: Download = flashrank_download) -> str:
    """Put `model` into `<cache_dir>/<model>/` unless it is already complete; one line saying what was done.

    Raises ValueError for a model FlashRank does not know and RuntimeError when the
    download did not produce every file the service loads; other errors (no network) pass
    through for the caller to name.
    """
    if flashrank_model_file(model) is None:
        raise ValueError(f"unknown FlashRank model {model!r}; check providers.rerank.model")
    shown = os.path.join(str(cache_dir), model)
    if flashrank_missing(cache_dir, model) is None:
        return f"{model} is already in {shown}; nothing fetched"
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".fetch-") as tmp:
        download(model, Path(tmp))
        incomplete = flashrank_missing(tmp, model)
        if incomplete is not None:
            raise RuntimeError(f"the download of {model} is incomplete: {incomplete}")
        target = cache / model
        if target.exists():   # an incomplete folder from an earlier copy (checked above)
            shutil.rmtree(target)
        os.replace(Path(tmp) / model, target)
    return f"fetched {model} into {shown} ({_size_mb(target):.0f} MB)"
