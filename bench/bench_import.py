"""Import: inserting into the live HNSW index vs dropping it, loading, and rebuilding.

    python -m bench import

The cut-over behind `import --index auto` (src/memory/importer.py): for a store of
`existing` rows, time importing `new` rows through the CLI's bulk path
(src/recall/bulk_import.write_batch, batches of 500) with the index live, and the
same with drop → load → rebuild (src/recall/hnsw). Synthetic rows and the fast
stand-in embedder of bench_memory_store, so the embedder's own cost (the same in
both modes) stays small.
"""

from __future__ import annotations

import time

from bench.bench_memory_store import TextMaker, WordVectorEmbedder
from bench.common import bench_pool
from src.recall import hnsw
from src.recall.bulk_import import ImportRecord, write_batch
from src.recall.store import NewMemory

#: (rows already stored, rows imported)
CASES = ((0, 2_000), (10_000, 1_000), (10_000, 4_000))


async def _import(pool, embedder, maker: TextMaker, n: int, tag: str) -> None:
    texts = maker.texts(n)
    records = [ImportRecord(NewMemory(t, metadata={"b": tag}), i + 1) for i, t in enumerate(texts)]
    for start in range(0, n, 500):
        await write_batch(pool, embedder, records[start:start + 500], {})


async def run() -> list[dict]:
    rows: list[dict] = []
    maker = TextMaker()
    embedder = WordVectorEmbedder(maker.words)
    for existing, new in CASES:
        for mode in ("live", "rebuild"):
            async with bench_pool(f"bench_import_{mode}") as pool:
                if existing:
                    await hnsw.drop_index(pool)
                    await _import(pool, embedder, maker, existing, "base")
                    await hnsw.rebuild_index(pool)
                started = time.perf_counter()
                if mode == "rebuild":
                    await hnsw.drop_index(pool)
                await _import(pool, embedder, maker, new, "new")
                if mode == "rebuild":
                    await hnsw.rebuild_index(pool)
                seconds = time.perf_counter() - started
            rows.append({"name": f"import {new:,} into {existing:,}, index {mode}", "value": new / seconds,
                         "unit": "rows/s"})
    return rows
