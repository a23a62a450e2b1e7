"""`reindex`: re-embed memories whose vector is not from the current embed model.

`--all` re-embeds every memory. Batches of 100 (the embedding batch limit) through
src/recall/reembed.ReembedWorker: the store's own embedding text, one UPDATE per
batch that re-checks the row's content, so a row the mind rewrote meanwhile is
left for the next run. Resumable: each written batch is checkpointed in
`reindex_runs`; after a crash the next `reindex` (same model, same scope) goes on
from the last checkpoint. Progress and an ETA on a terminal; a count line at the end.
"""

from __future__ import annotations

import argparse

from src.memory.console import Progress
from src.memory.session import Session
from src.recall.reembed import (
    ReembedPacing,
    ReembedWorker,
    ReindexRun,
    checkpoint_run,
    finish_run,
    open_run,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reindex", help="re-embed memories made by another embed model (or all)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--all", action="store_true", help="re-embed every memory, not only stale ones")
    p.add_argument("--batch-size", type=int, default=100, metavar="N",
                   help="memories per embedding call and UPDATE (1..100, default 100)")
    p.set_defaults(run=run)


async def run(args: argparse.Namespace, s: Session) -> int:
    if not 1 <= args.batch_size <= 100:
        s.err.write("reindex: --batch-size must be in 1..100 (the embedding batch limit)\n")
        return 2
    embedder = s.providers.embedder
    scope = "all" if args.all else "stale"
    state = await open_run(s.pool, embedder.model_name, scope)
    if state.resumed:
        s.out.write(f"resuming the {scope} re-embedding with {embedder.model_name} after memory "
                    f"#{state.last_id} ({state.done} done before)\n")
    progress = Progress("re-embedding", 0, s.err)

    async def checkpoint(last_id: int, done: int) -> None:
        await checkpoint_run(s.pool, state.run_id, last_id, state.done + done)

    worker = ReembedWorker(s.pool, embedder, pacing=ReembedPacing(batch_size=args.batch_size),
                           reindex=ReindexRun(everything=args.all, start_after=state.last_id if args.all else 0,
                                              on_batch=checkpoint),
                           on_progress=lambda done, total, _rate: progress.update(done, total))
    report = await worker.run()
    progress.finish()
    if report.stopped != "complete":
        s.err.write(f"reindex stopped ({report.stopped}): {report.done} re-embedded; run it again "
                    "once the embedder works\n")
        return 1
    await finish_run(s.pool, state.run_id)
    s.out.write(f"re-embedded {report.done} memories with {embedder.model_name} in {report.seconds:.1f} s "
                f"({report.skipped} left stale: changed meanwhile or failing)\n")
    return 0
