"""Connections an audit found no test holding (issue 40 item 4). Each was broken in a copy and
every relevant test still passed; each test here fails under its break:

- the DMN's 2-hop recall forced to 1 hop (src/loop/recalling.py `Recalling.cue`): the loop's
  recall of a DMN thought asks the retriever for `loop.dmn_hops` hops, a user's for one, and
  through the real retriever only the DMN's recall reaches the memory three links from the one in context;
- recall's cold-start → mature Dirichlet schedule pinned to age 0 (src/recall/retrieval.py
  `Retriever._blend`): the blend a real retrieval draws moves from the cold-start alphas
  (semantic-heavy) to the target ones (co-activation and emotion up) as the store grows;
- the FIFO's four intensity signals fixed at 0.5 (src/loop/aftermath.py `Aftermath._intensity`):
  each of the four moves the intensity the window is pruned to, each case failing under its own
  signal's break.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import numpy as np
import pytest

from src.context.settings import FifoSettings
from src.loop.aftermath import Aftermath
from src.loop.recalling import Recalling
from src.recall import relevance as rel
from src.recall.retrieval import Retriever
from src.recall.settings import RetrievalSettings
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.fakes import HashEmbedder

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


class CapturingRetriever:
    """The retriever as the loop calls it: what it is asked is kept, nothing is found."""

    def __init__(self):
        self.cues = []

    async def search(self, cue, *, rng, now=None):
        self.cues.append(cue)
        return None


def _attended(source: str) -> SimpleNamespace:
    winner = SimpleNamespace(source=source, text="the blue bicycle by the river", embedding=None,
                             record_text="the blue bicycle by the river")
    return SimpleNamespace(winner=winner, layer_vecs=None, inputs=SimpleNamespace(kept=()))


@pytest.mark.parametrize(("source", "hops"), [("dmn", 2), ("user", 1), ("consolidation", 1)])
async def test_a_dmn_thought_recalls_two_hops_and_everything_else_one(source, hops):
    retriever = CapturingRetriever()
    recalling = Recalling(retriever, assembler=None, conversation=SimpleNamespace(active_ids=(7, 9)),
                          rng=np.random.default_rng(1), dmn_hops=2)
    await recalling.search(_attended(source), shortfalls=None, now=NOW)
    [cue] = retriever.cues
    assert (cue.hops, tuple(cue.active_ids)) == (hops, (7, 9))


async def test_a_dmn_thought_reaches_the_memory_two_hops_away_and_a_user_message_does_not(pool):
    """Through the real retriever: the chain tea → bicycle → sister → asyncio (co-access), the
    tea memory in context. One hop's spreading stops at the sister; the DMN's second carries
    activation on to asyncio, so its recall scores that memory's co-activation and a user's does not."""
    embedder = HashEmbedder()
    texts = ["I drink earl grey tea every morning", "the blue bicycle lives in the garage",
             "my sister moved to Lisbon in spring", "python asyncio loops need careful cancellation"]
    tea, bike, sister, asyncio_ = await MemoryStore(pool, embedder).store_many([NewMemory(t) for t in texts])
    for x, y in ((tea, bike), (bike, sister), (sister, asyncio_)):
        a, b = sorted((x, y))
        await pool.execute("INSERT INTO memory_co_access (memory_id_a, memory_id_b, co_access_count) "
                           "VALUES ($1, $2, 2)", a, b)
    retriever = Retriever(pool, embedder, None, Safety(), RetrievalSettings())

    async def spread_reaching(source: str) -> dict[int, float]:
        recalling = Recalling(retriever, assembler=None, conversation=SimpleNamespace(active_ids=(tea,)),
                              rng=np.random.default_rng(3), dmn_hops=2)
        attended = _attended(source)
        found = await recalling.search(attended, shortfalls=None, now=NOW)
        recalled = await recalling.rank(found, shortfalls=None)
        return {r.id: r.spread for r in recalled.memories + recalled.near_misses}

    dmn, user = await spread_reaching("dmn"), await spread_reaching("user")
    assert dmn[sister] == pytest.approx(user[sister]) and dmn[sister] > 0
    assert dmn[asyncio_] > 0 and user.get(asyncio_, 0.0) == 0.0


async def _mean_blend(pool, embedder, *, maturity_memories: int, draws: int = 60) -> dict[str, float]:
    retriever = Retriever(pool, embedder, None, Safety(), RetrievalSettings(), maturity_memories=maturity_memories)
    rng = np.random.default_rng(5)
    blends = [(await retriever.retrieve("the river walk", rng=rng, now=NOW, mutate=False)).blend
              for _ in range(draws)]
    return {c: float(np.mean([b[c] for b in blends])) for c in rel.COMPONENTS}


async def test_the_blend_moves_from_cold_start_to_target_as_the_store_matures(pool):
    embedder = HashEmbedder()
    await MemoryStore(pool, embedder).store_many([NewMemory(f"a walk by the river, day {i}") for i in range(40)])
    # the same 40 memories: a newborn store when maturity needs 40,000, a mature one at 40
    young = await _mean_blend(pool, embedder, maturity_memories=40_000)
    mature = await _mean_blend(pool, embedder, maturity_memories=40)
    cold, target = (rel.blend_alpha(m) for m in (0.001, 1.0))
    share = {name: {c: a[c] / sum(a.values()) for c in a} for name, a in (("cold", cold), ("target", target))}
    # coactivation: 1/17 of the cold alphas, 5/18.5 of the target's (a 60-draw mean is within ±0.03)
    assert young["coactivation"] == pytest.approx(share["cold"]["coactivation"], abs=0.03)
    assert mature["coactivation"] == pytest.approx(share["target"]["coactivation"], abs=0.04)
    assert mature["emotional"] > young["emotional"] + 0.08
    assert young["semantic"] > mature["semantic"] + 0.15


def _aftermath(last_system2=None) -> Aftermath:
    return Aftermath(gates=None, conversation=SimpleNamespace(last_system2=last_system2), fifo=FifoSettings(),
                     say=print)


def _turn(*, weighted=(), goal=0.0, charge=0.0):
    ranked = [SimpleNamespace(components=SimpleNamespace(goal_relevance=goal))]
    attended = SimpleNamespace(allocation=SimpleNamespace(ranked=ranked),
                               winner=SimpleNamespace(emotional_charge=charge))
    record = SimpleNamespace(retrieval=SimpleNamespace(memories=[SimpleNamespace(weighted=w) for w in weighted]))
    return attended, record


def test_a_turn_that_engaged_nothing_keeps_the_window_at_its_quietest():
    assert _aftermath()._intensity(*_turn(), NOW) == 0.0


# Each case raises one signal over a quiet turn and asks that the intensity rise by that signal's
# weighted share: a signal fixed at a constant (whatever its value) fails its own case only.
@pytest.mark.parametrize("signal", ["gate_score", "system2_recency", "goal_relevance", "emotional_charge"])
def test_each_intensity_signal_moves_what_the_window_keeps(signal):
    quiet = _aftermath()._intensity(*_turn(), NOW)
    loud_turn = {"gate_score": _turn(weighted=(0.9, 0.7)), "goal_relevance": _turn(goal=0.9),
                 "emotional_charge": _turn(charge=0.9)}.get(signal, _turn())
    after = _aftermath(NOW - timedelta(seconds=1) if signal == "system2_recency" else None)
    loud = after._intensity(*loud_turn, NOW)
    # the default weights are equal (a quarter each); System 2 a second ago: one second of a 600 s half-life
    assert loud - quiet == pytest.approx(0.25 * {"gate_score": 0.8, "system2_recency": 0.5 ** (1 / 600),
                                                 "goal_relevance": 0.9, "emotional_charge": 0.9}[signal])
