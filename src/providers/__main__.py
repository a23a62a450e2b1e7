"""python -m src.providers fetch-models — download the models the service only reads (`make models`).

Today that is FlashRank's reranker, into runtime.yaml's `providers.rerank.cache_dir`: the
service never downloads at run time, so without this step (or the Docker image, whose
build runs the same command) every recall goes without the rerank stage.
"""

from __future__ import annotations

import argparse
import sys

from src.config import load_settings
from src.errors import ConfigError
from src.providers.rerank_fetch import fetch_flashrank


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.providers",
                                     description="Fetch the models MoltBot reads from disk (needs network access).")
    parser.add_argument("--config", help="path of runtime.yaml (default: $MOLTBOT_CONFIG or ./runtime.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch-models", help="download the FlashRank reranker into providers.rerank.cache_dir, once")
    args = parser.parse_args(argv)
    try:
        rerank = load_settings(args.config).providers.rerank
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    try:
        print(fetch_flashrank(rerank.cache_dir, rerank.model), flush=True)
    except ValueError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - requests, zipfile, onnxruntime: name it in one line
        print(f"could not fetch {rerank.model} into {rerank.cache_dir}: {type(exc).__name__}: {exc} "
              "(this step needs network access; run it where there is some)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
