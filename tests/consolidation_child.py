"""A deep pass in a child process that freezes at a chosen point, for the SIGKILL test.

    python -m tests.consolidation_child DSN MARKER

The pass's Phase 2 answer holds two insights; when the second one is being embedded
(to check its citations, before it is stored; the first is already written), the
child writes MARKER and blocks until it is killed.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from src.consolidation.deep.deep_pass import ConsolidationParts, run_deep_pass
from src.consolidation.settings import ConsolidationSettings
from src.db.pool import create_pool
from src.weights.safety import Safety
from tests.consolidation_fakes import ConsolidationModel, ids_in, language_model
from tests.fakes import HashEmbedder

# each rests on the deployment memories it cites (integrity.screen)
FIRST = "Small projects deploy with one simple shell script."
SECOND = "One simple shell script replaces kubernetes for these small projects."


def two_insights(request) -> str:
    ids = ids_in(request.messages[0].content)
    return json.dumps({"insights": [{"insight": FIRST, "cited_ids": ids[:2]},
                                    {"insight": SECOND, "cited_ids": ids[2:4]}]})


class FreezingEmbedder(HashEmbedder):
    def __init__(self, marker: Path):
        super().__init__()
        self.marker = marker

    async def embed(self, texts, task_type, titles=None):
        if any(SECOND in t for t in texts):
            self.marker.write_text("frozen")
            time.sleep(600)  # noqa: ASYNC251 - freeze the whole process: the parent kills it here
        return await super().embed(texts, task_type, titles)


async def main(dsn: str, marker: Path) -> None:
    pool = await create_pool(dsn, min_size=1, max_size=4)
    backend = ConsolidationModel().push("insights", two_insights)
    await run_deep_pass(ConsolidationParts(pool, embedder=FreezingEmbedder(marker),
                                           llm=language_model(backend, pool, "child"), safety=Safety(),
                                           settings=ConsolidationSettings()),
                        trigger="manual")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
