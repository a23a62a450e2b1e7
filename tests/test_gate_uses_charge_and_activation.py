"""The exit gate uses what it computes (issue 40 item 2), through the real gate and database:

- the emotional charge raises the persist decision: a charge above 0.3 adds 0.15 to the
  item's relevance (plan §2.8 "v0.1 Emotional charge … +0.15 bonus when > 0.3"; the gut's
  charge, §5.1, in its place when wired), so a borderline item with a strong charge persists
  where the same item without one waits in the buffer;
- ACT-R's persist threshold τ (plan §2.7 "Persist threshold: tau = 0.0"): an item whose
  activation reaches it rises one relevance row where that decides whether it is kept, so
  the same item judged a second after it was said persists, and an hour later waits in the
  buffer; it never turns a repeat into a reinforcement of the memory it repeats;
- neither overrides the user's kind of line (issue 22): chatter stays unkept and a
  statement stays kept.

The gut is a stub with a fixed charge (the seam src/gates/persist_hooks.py names). The
generator always draws 0.5: ACT-R's logistic noise is then exactly 0 and the noise floor
never fires, so A_i = B_i + S_i and the cells are the matrix's alone.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import numpy as np
import pytest

from src.gates.exit import ExitSetup
from src.gates.memory_gate import Gates
from src.gates.persist_hooks import PersistHooks
from src.providers.embedding import embed_memories
from src.recall.store import MemoryStore, NewMemory
from src.weights.safety import Safety
from tests.fakes import HashEmbedder
from tests.gate_fakes import ScriptedMetaLLM, attention_for, gate_settings

BORDERLINE = "The harbour ferry timetable changes next week"
#: S_i of the borderline item: peripheral (0.3 <= S <= 0.6), core once 0.15 is added.
PERIPHERAL_S = 0.5
SECOND, HOUR = timedelta(seconds=1), timedelta(hours=1)


class MiddleDraws(random.Random):
    """Every draw is 0.5: no ACT-R noise (s·ln(0.5/0.5) = 0), no noise-floor flip."""

    def random(self) -> float:
        return 0.5


class StubGut:
    """The gut as the exit gate sees it, with one charge for everything."""

    def __init__(self, charge: float):
        self.value = charge

    def charge(self, vec: np.ndarray | None) -> float:
        return self.value

    def absorb(self, embed_model: str, vectors: np.ndarray) -> None:
        pass


class Clock:
    def __init__(self):
        self.now: datetime | None = None

    def __call__(self) -> datetime:
        return self.now


async def _judge(pool, text: str, *, charge: float, after: timedelta, source_tag: str = "internal_dmn",
                 s_i: float = PERIPHERAL_S, **exit_settings):
    """`text` said under a focus giving it `s_i`, flushed `after` it was said, with the gut's
    `charge`; its exit decision row."""
    clock = Clock()
    gates = Gates.build(pool, HashEmbedder(), ScriptedMetaLLM(configured=False), gate_settings(**exit_settings),
                        Safety(), rng=MiddleDraws(),
                        setup=ExitSetup(clock=clock, hooks=PersistHooks(gut=StubGut(charge))))
    admitted = await gates.admit(text, source_tag=source_tag, exchange=False)
    assert admitted.scratch_id is not None
    vec = await embed_memories(HashEmbedder(), [text], ["episodic"])
    await gates.note_focus([admitted.scratch_id], attention_for(vec, [s_i]))
    said_at = await pool.fetchval("SELECT created_at FROM scratch_buffer WHERE id = $1", admitted.scratch_id)
    clock.now = said_at + after
    await gates.exit.flush(reason="test")
    return await pool.fetchrow(
        """SELECT cell_relevance, cell_novelty, cell_action, action, s_i, relevance, activation,
                  emotional_charge, reason
             FROM gate_decisions WHERE gate = 'exit' AND scratch_id = $1""", admitted.scratch_id)


async def _fresh(pool) -> None:
    await pool.execute("TRUNCATE memories, scratch_buffer, gate_decisions CASCADE")


async def test_a_strong_charge_raises_a_borderline_item_into_the_persist_cell(pool):
    # an hour after it was said its activation is far below τ: only the charge can lift it
    calm = await _judge(pool, BORDERLINE, charge=0.0, after=HOUR)
    await _fresh(pool)
    moved = await _judge(pool, BORDERLINE, charge=1.0, after=HOUR)

    assert calm["s_i"] == pytest.approx(PERIPHERAL_S, abs=1e-5) and moved["s_i"] == pytest.approx(calm["s_i"])
    assert calm["activation"] < 0.0 and moved["activation"] < 0.0
    assert (calm["emotional_charge"], moved["emotional_charge"]) == (0.0, 1.0)   # the charge as felt
    assert calm["relevance"] == pytest.approx(PERIPHERAL_S, abs=1e-5)
    assert moved["relevance"] == pytest.approx(PERIPHERAL_S + 0.15, abs=1e-5)
    assert (calm["cell_relevance"], calm["cell_novelty"], calm["action"]) == ("peripheral", "novel", "buffer")
    assert (moved["cell_relevance"], moved["cell_novelty"], moved["action"]) == ("core", "novel", "persist")
    assert moved["reason"].startswith("charge 1.00 adds 0.15 to relevance; core x novel -> persist")
    assert await pool.fetchval("SELECT count(*) FROM memories WHERE content = $1", BORDERLINE) == 1


@pytest.mark.parametrize(("charge", "bonus"), [(0.3, 0.0), (0.31, 0.15)])
async def test_the_bonus_is_for_a_charge_above_three_tenths(pool, charge, bonus):
    row = await _judge(pool, BORDERLINE, charge=charge, after=HOUR)
    assert row["relevance"] == pytest.approx(PERIPHERAL_S + bonus, abs=1e-5)


async def test_an_activation_at_or_above_tau_lifts_the_item_one_row(pool):
    # a second after it was said: B_i = ln(1^-0.5) = 0, so A_i = S_i = 0.5 >= τ = 0
    active = await _judge(pool, BORDERLINE, charge=0.0, after=SECOND)
    await _fresh(pool)
    # an hour later: B_i = -0.5·ln(3600) ≈ -4.09, A_i ≈ -3.59 < τ
    faded = await _judge(pool, BORDERLINE, charge=0.0, after=HOUR)

    assert active["activation"] == pytest.approx(PERIPHERAL_S, abs=1e-4)
    assert faded["activation"] == pytest.approx(PERIPHERAL_S - 0.5 * np.log(3600), abs=1e-3)
    # relevance itself is the same: τ moves the row, not the score
    assert active["relevance"] == pytest.approx(faded["relevance"])
    assert (faded["cell_relevance"], faded["action"]) == ("peripheral", "buffer")
    assert (active["cell_relevance"], active["action"]) == ("core", "persist")
    assert active["reason"].startswith("peripheral lifted to core (ACT-R activation >= tau); core x novel")


async def test_tau_is_a_setting_and_lifts_an_irrelevant_item_to_the_buffer(pool):
    # irrelevant (S_i 0.2) and active: irrelevant x novel (drop) becomes peripheral x novel (buffer)
    lifted = await _judge(pool, BORDERLINE, charge=0.0, after=SECOND, s_i=0.2)
    assert (lifted["cell_relevance"], lifted["action"]) == ("peripheral", "buffer")
    await _fresh(pool)
    # τ above anything an item reaches: the row is relevance's alone
    high = await _judge(pool, BORDERLINE, charge=0.0, after=SECOND, s_i=0.2, persist_tau=5.0)
    assert (high["cell_relevance"], high["action"]) == ("irrelevant", "drop")


async def test_neither_charge_nor_tau_overrides_the_users_kind_of_line(pool):
    # chatter with the strongest charge, flushed at once (above τ): still unkept
    chatter = await _judge(pool, "haha ok thanks so much", charge=1.0, after=SECOND, source_tag="external_user")
    assert (chatter["relevance"], chatter["cell_relevance"], chatter["action"]) == (0.0, "irrelevant", "drop")
    await _fresh(pool)
    question = await _judge(pool, "What time does the ferry leave tomorrow?", charge=1.0, after=SECOND,
                            source_tag="external_user")
    assert question["action"] == "drop"
    await _fresh(pool)
    # a statement without charge, judged an hour later in a focus unrelated to it: kept (core)
    statement = await _judge(pool, "My sister Alma moved to Porto last spring", charge=0.0, after=HOUR,
                             source_tag="external_user", s_i=0.0)
    assert (statement["cell_relevance"], statement["action"]) == ("core", "persist")


async def test_tau_decides_keeping_the_item_never_reinforcing_another(pool):
    # the mind says again what it said before, flushed a second later (above τ): still the
    # peripheral x confirming skip, not a reinforcement of its own earlier memory
    [earlier] = await MemoryStore(pool, HashEmbedder()).store_many([NewMemory(BORDERLINE)])
    again = await _judge(pool, BORDERLINE + "!", charge=0.0, after=SECOND)
    assert again["activation"] >= 0.0
    assert (again["cell_relevance"], again["cell_novelty"], again["action"]) == ("peripheral", "confirming", "skip")
    assert await pool.fetchval("SELECT count(*) FROM consolidation_log WHERE memory_id = $1", earlier) == 0
