"""The idle mind on a store of imported strangers (issue 38 item 7).

    python -m bench dmn

A store mostly of other people's conversations: 1,000 imported turns (two speakers per
conversation, named, dated years back, written through the import path) beside 20 of the
user's statements. An idle stretch in compressed time: the DMN ticks every `dmn.interval_s`
(no pacing: every tick is a chance to think, the most an idle mind spends), the loop
drains what it queued after each tick, an instant fake model answers (bench/bench_loop.py's
InstantLLM, at the provider seam). Counted: the chances to think, the thoughts (queued DMN
items), those an imported stranger's memory seeded, the chances left quiet for the share,
and the model calls (of strangers' thoughts, of the others, and the exit gate's when the
scratch buffer is flushed at the end) — with `dmn.imported_share` at 1 (no limit: the DMN
before issue 38) and at its default, and on a store of the imported turns alone.

Own database on the embedded test server, dropped at the end.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

from bench.bench_loop import InstantLLM, _mind
from bench.common import bench_pool
from src.dmn.generator import DmnGenerator, DmnQueue
from src.dmn.settings import DmnSettings
from src.recall.bulk_import import ImportRecord, write_batch
from src.recall.store import MemoryStore, NewMemory
from tests.fakes import HashEmbedder

IMPORTED = 1_000
USER = 20
TICKS = 200                      # 100 minutes of idle at the default 30 s interval
TURNS = 20                       # turns per imported conversation
SPEAKERS = (("Jolene", "Deb"), ("Emi", "Kate"), ("Marco", "Ines"))
T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def _vocabulary(rng: np.random.Generator, n: int = 600) -> list[str]:
    letters = np.array(list("abcdefghijklmnoprstuvw"))
    return ["".join(rng.choice(letters, size=int(rng.integers(4, 9)))) for _ in range(n)]


def _sentence(rng: np.random.Generator, words: Sequence[str]) -> str:
    return " ".join(rng.choice(words, size=int(rng.integers(6, 12))))


def imported_turns(n: int, seed: int = 38) -> list[ImportRecord]:
    """`n` turns of imported two-person conversations, as an import file's lines become records:
    `metadata.speaker` names each turn's speaker, the content starts "Name: " (the convention),
    dated three to four years before T0."""
    rng = np.random.default_rng(seed)
    words = _vocabulary(rng)
    out = []
    for i in range(n):
        conversation, turn = divmod(i, TURNS)
        pair = SPEAKERS[conversation % len(SPEAKERS)]
        speaker = pair[turn % 2]
        at = T0 - timedelta(days=1100 + 10 * conversation, minutes=-turn)
        memory = NewMemory(f"{speaker}: {_sentence(rng, words)}", source_tag="import",
                           metadata={"speaker": speaker}, event_time=at)
        out.append(ImportRecord(memory, line=i + 1, conversation=f"chat-{conversation}", turn=turn))
    return out


def user_statements(n: int, seed: int = 7) -> list[NewMemory]:
    """`n` of the user's statements over the last weeks."""
    rng = np.random.default_rng(seed)
    words = _vocabulary(rng)
    return [NewMemory(f"I {_sentence(rng, words)}", event_time=T0 - timedelta(days=1 + 2 * i)) for i in range(n)]


async def load_store(pool, embedder, *, imported: int, user: int) -> None:
    """The store: `imported` strangers' turns through the import path, `user` statements stored."""
    records = imported_turns(imported)
    for start in range(0, len(records), 500):
        await write_batch(pool, embedder, records[start:start + 500], {})
    if user:
        await MemoryStore(pool, embedder).store_many(user_statements(user))


@dataclass(frozen=True)
class Stretch:
    """What an idle stretch came to: per thought, whether an imported stranger's memory seeded it."""

    chances: int                 # ticks that got as far as choosing a seed
    thoughts: list[bool]         # in the order queued
    quiet_for_share: int         # chances left quiet: only strangers in reach, their share taken
    calls_strangers: int = 0     # model calls of the cycles that thought a stranger's memory
    calls_own: int = 0           # of the others

    @property
    def stranger_thoughts(self) -> int:
        return sum(self.thoughts)


async def idle_stretch(mind, gen: DmnGenerator, ticks: int, *, calls: Callable[[], int] = lambda: 0,
                       t0: datetime = T0) -> Stretch:
    """`ticks` DMN ticks `interval_s` apart, the loop draining what each queued; `calls` counts the
    model's calls so far (each tick's are its thought's: one thought a tick)."""
    quiet = chances = 0
    spent = {True: 0, False: 0}
    for i in range(ticks):
        now = t0 + timedelta(seconds=i * gen.settings.interval_s)
        report = await gen.tick(now)
        held = report.reason.startswith("imported strangers' share")
        chances += report.produced or held
        quiet += held
        before = calls()
        while len(mind.loop.queue):
            await mind.loop.cycle(now)
        if report.produced:     # the queued item is the tick's first output (src/dmn/generator.py)
            spent[bool(report.outputs[0].detail.get("imported_stranger"))] += calls() - before
    rows = await mind.pool.fetch("SELECT detail FROM dmn_items WHERE queued ORDER BY id")
    thoughts = [bool(json.loads(r["detail"]).get("imported_stranger")) for r in rows]
    return Stretch(chances, thoughts, quiet, spent[True], spent[False])


def generator(mind, embedder, settings: DmnSettings, seed: int = 5) -> DmnGenerator:
    return DmnGenerator(mind.pool, embed_model=embedder.model_name,
                        queue=DmnQueue(mind.loop.submit, lambda: mind.loop.queue.counts()["dmn"]),
                        rng=np.random.default_rng(seed), settings=settings)


async def _run(label: str, *, user: int, share: float) -> list[dict]:
    embedder = HashEmbedder()
    async with bench_pool("bench_dmn") as pool:
        await load_store(pool, embedder, imported=IMPORTED, user=user)
        llm = InstantLLM()
        with tempfile.TemporaryDirectory() as tmp:
            mind = await _mind(pool, embedder, llm, tmp, f"bench-dmn-{label}")
            gen = generator(mind, embedder, DmnSettings(imported_share=share))
            stretch = await idle_stretch(mind, gen, TICKS, calls=lambda: len(llm.calls))
            thinking = len(llm.calls)
            await mind.close()          # flushes the scratch buffer: the exit gate keeps thoughts
    n = len(stretch.thoughts)
    name = f"{label}, imported_share {share:g}"
    return [{"name": f"{name}: chances to think", "value": stretch.chances, "unit": "chances"},
            {"name": f"{name}: thoughts", "value": n, "unit": "thoughts"},
            {"name": f"{name}: thoughts seeded by imported strangers", "value": stretch.stranger_thoughts,
             "unit": "thoughts"},
            {"name": f"{name}: strangers' share of the chances", "value": stretch.stranger_thoughts
             / max(1, stretch.chances), "unit": "share"},
            {"name": f"{name}: chances left quiet for the share", "value": stretch.quiet_for_share,
             "unit": "chances"},
            {"name": f"{name}: LLM calls of strangers' thoughts", "value": stretch.calls_strangers, "unit": "calls"},
            {"name": f"{name}: LLM calls of the other thoughts", "value": stretch.calls_own, "unit": "calls"},
            {"name": f"{name}: LLM calls keeping them (the exit gate's flush at close)",
             "value": len(llm.calls) - thinking, "unit": "calls"},
            {"name": f"{name}: LLM calls, all (fake)", "value": len(llm.calls), "unit": "calls"}]


async def run() -> list[dict]:
    mixed = f"{IMPORTED:,} imported + {USER} user, {TICKS} ticks"
    alone = f"{IMPORTED:,} imported only, {TICKS} ticks"
    rows: list[dict] = []
    rows += await _run(mixed, user=USER, share=1.0)
    rows += await _run(mixed, user=USER, share=DmnSettings().imported_share)
    rows += await _run(alone, user=0, share=1.0)
    rows += await _run(alone, user=0, share=DmnSettings().imported_share)
    return rows
