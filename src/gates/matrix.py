"""The exit gate's 3×3 decision matrix (plan §2.8), pure: no I/O, the generator passed in.

Relevance axis, on r = max(S_i, bootstrap floor) + the charge's bonus:  core r > core (0.6),
peripheral peripheral (0.3) <= r <= core, irrelevant r < peripheral. The plan leaves
the boundaries themselves open; they fall on the permissive side.

Novelty axis, on s = cosine similarity to the nearest stored memory:
contradicting when s > contradicting (0.7) and the pair is judged opposed;
confirming when s > confirming (0.85) and judged *not* opposed; novel otherwise.
Two cases the plan leaves open also fall on the permissive side: the band between
novel (0.6) and confirming is treated as novel (related but different content is
worth keeping), and a very similar pair whose opposition stayed undecided (reflex
mode, provider failure) is novel too — kept, with no claim of agreement that would
fold it into the old memory, and no claim of contradiction that would weaken it.

                 confirming         novel              contradicting
    core         reinforce (mod.)   persist (high)     persist_flag (max)
    peripheral   skip (low)         buffer (mod.)      persist (high)
    irrelevant   drop               drop               drop

Noise floor: in every cell, with probability `noise_floor`, the gate takes the
cell's alternative instead, so gate tuning (§4.5) sees what the other choice would
have led to. The alternative flips whether the item is written now: cells that do
not persist (reinforce, skip, buffer, drop) persist; cells that persist defer to
the buffer (the item returns at the next flush). Noise therefore never destroys
anything: dropping is permanent, over-persisting is recoverable.

Emotional charge: a charge above `charge_bonus_above` (0.3) adds `charge_bonus` (0.15) to
the item's relevance before the matrix reads it (plan §2.8, "v0.1 Emotional charge …
+0.15 bonus when > 0.3"; the gut's charge, §5.1, takes the v0.1 charge's place when it is
wired): what moves the mind is kept more readily, so a borderline item with a strong
charge crosses into the next row.

ACT-R's persist threshold τ (plan §2.7 "Persist threshold: tau = 0.0"; §2.8 "ACT-R
activation → 3×3 decision matrix → action"): an item whose activation A_i = B_i + S_i +
P_i + ε reaches τ rises one relevance row where that decides whether the item itself is
kept (`TAU_LIFTS`: irrelevant × novel drop → buffer, peripheral × novel buffer → persist,
irrelevant × contradicting drop → persist); below τ the row stands as relevance put it.
It lifts and never lowers: the plan's gate starts permissive (dropping is permanent), and
at flush time most items sit below τ (B_i of a line said minutes ago is -0.5·ln(age) ≈ -2
to -3), so a τ that could only take away would take away nearly everything. It is a
*persist* threshold, so it never turns an item into a reinforcement or a contradiction
flag of another memory: a line the mind repeats, flushed soon after it was said, would
otherwise reinforce its own earlier memory. The user's chatter and questions are not
lifted: their kind decides (src/gates/utterance.py).

Bootstrap floor: a newborn mind has no identity, goals or memories, so spreading
activation has nothing to spread from and S_i = 0 for everything. The floor
`bootstrap_floor * (1 - maturity)` for the sources in `bootstrap_sources` (the
user) keeps novel input from them in the core row at birth; it fades linearly
with the maturity the rest of the mind uses (memory count / `agent.maturity_memories`, 1000) and is gone
once the store is mature, when S_i has real sources to spread from.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from src.gates.settings import ExitGateSettings, GateThresholds
from src.gates.utterance import Utterance, content_words, words
from src.recall.activation import ActivationResult

NOVELTY_CELLS = ("confirming", "novel", "contradicting")
#: The cells ACT-R's τ lifts one row, to the row they rise to: those where the row decides
#: whether the item itself is kept (see the module docstring).
TAU_LIFTS: dict[tuple[str, str], str] = {
    ("irrelevant", "novel"): "peripheral", ("peripheral", "novel"): "core",
    ("irrelevant", "contradicting"): "peripheral",
}
#: Words that turn a statement into its denial (with any "…n't").
NEGATIONS = frozenset({"not", "no", "never", "nothing", "nobody", "none", "neither", "nor"})

MATRIX: dict[tuple[str, str], str] = {
    ("core", "confirming"): "reinforce",
    ("core", "novel"): "persist",
    ("core", "contradicting"): "persist_flag",
    ("peripheral", "confirming"): "skip",
    ("peripheral", "novel"): "buffer",
    ("peripheral", "contradicting"): "persist",
    ("irrelevant", "confirming"): "drop",
    ("irrelevant", "novel"): "drop",
    ("irrelevant", "contradicting"): "drop",
}
PRIORITY: dict[tuple[str, str], str] = {
    ("core", "confirming"): "moderate", ("core", "novel"): "high", ("core", "contradicting"): "max",
    ("peripheral", "confirming"): "low", ("peripheral", "novel"): "moderate",
    ("peripheral", "contradicting"): "high",
    ("irrelevant", "confirming"): "none", ("irrelevant", "novel"): "none",
    ("irrelevant", "contradicting"): "none",
}
NOISE_ALTERNATIVE: dict[str, str] = {
    "reinforce": "persist", "skip": "persist", "buffer": "persist", "drop": "persist",
    "persist": "buffer", "persist_flag": "buffer",
}
PERSISTING = frozenset({"persist", "persist_flag"})


def relevance_cell(relevance: float, th: GateThresholds) -> str:
    """core / peripheral / irrelevant for a relevance score."""
    if relevance > th.core:
        return "core"
    if relevance >= th.peripheral:
        return "peripheral"
    return "irrelevant"


def novelty_band(similarity: float | None, th: GateThresholds) -> str:
    """How close the nearest memory is, before any opposition judgement (for the log)."""
    if similarity is None or similarity < th.novel:
        return "novel"
    return "confirming" if similarity > th.confirming else "related"


def novelty_cell(similarity: float | None, opposed: bool | None, th: GateThresholds) -> str:
    """confirming / novel / contradicting from similarity and the opposition verdict.

    `opposed` is the contradiction detector's verdict for the nearest memory: True,
    False, or None when it was not asked or stayed undecided.
    """
    if similarity is None:
        return "novel"                       # empty store: nothing to confirm or contradict
    if opposed is True and similarity > th.contradicting:
        return "contradicting"
    if opposed is False and similarity > th.confirming:
        return "confirming"
    return "novel"


def bootstrap_floor(source_tag: str, maturity: float, settings: ExitGateSettings) -> float:
    """The relevance floor for an item from `source_tag` at `maturity` in [0, 1]."""
    if not 0.0 <= maturity <= 1.0:
        raise ValueError(f"maturity must be in [0, 1], got {maturity!r}")
    if source_tag not in settings.bootstrap_sources:
        return 0.0
    return settings.bootstrap_floor * (1.0 - maturity)


def charge_bonus(charge: float, settings: ExitGateSettings) -> float:
    """What the emotional charge adds to relevance: `charge_bonus` when the charge is above
    `charge_bonus_above` ("+0.15 bonus when > 0.3", plan §2.8), else nothing."""
    return settings.charge_bonus if charge > settings.charge_bonus_above else 0.0


def item_relevance(s_i: float, floor: float, said: Utterance | None, charge: float,
                   settings: ExitGateSettings) -> float:
    """Relevance r = min(1, max(S_i, floor) + the charge's bonus), then the user's kind of
    line (src/gates/utterance.py): a statement that carries information is at least core
    (`statement_relevance`); chatter and questions carry nothing to keep (0), whatever
    their charge."""
    r = min(1.0, max(s_i, floor) + charge_bonus(charge, settings))
    if said is None:
        return r
    return max(r, settings.statement_relevance) if said.kind == "statement" else 0.0


def confirmed_or_novel(item: str, nearest: str) -> tuple[str, str]:
    """("confirming", "") when `nearest` states every content word of `item`, else
    ("novel", why). Confirming means the same thing said again: a close embedding of a
    line that says more (another name, place, number) is new information, and folded
    into its neighbour as a reinforcement the new fact would be lost."""
    new_words = content_words(item) - content_words(nearest)
    if new_words:
        return "novel", f"; says what the nearest memory does not ({', '.join(sorted(new_words)[:5])}) -> novel"
    # content words leave out "not": "I do not like jazz" states no word "I like jazz"
    # lacks, yet it is no confirmation (the opposition layers miss some negations)
    if _negated(item) != _negated(nearest):
        return "novel", "; one of the two is negated, the other not -> novel"
    return "confirming", ""


def _negated(text: str) -> bool:
    return any(w in NEGATIONS or w.endswith("n't") for w in words(text))


@dataclass(frozen=True)
class CellDecision:
    """Where an item landed and what the gate does with it."""

    relevance: str
    novelty: str
    cell_action: str
    action: str
    draw: float
    noise_rate: float
    noise_fired: bool
    priority: str
    reason: str


@dataclass(frozen=True)
class BufferRounds:
    """Where an item stands in the buffer: the flush round it is in, the most it may stay,
    and whether its TTL has passed (either ends a buffer cell in persist)."""

    round_: int = 1
    max_rounds: int = 3
    expired: bool = False


def decide_cell(relevance: float, novelty: str, th: GateThresholds, noise_rate: float,
                rng: random.Random, *, rounds: BufferRounds = BufferRounds(),
                question: bool = False, active: bool = False) -> CellDecision:
    """Matrix cell, noise floor (one draw from `rng`), and the buffer's last round.

    `question`: the user asked and stated nothing (src/gates/utterance.py). It is
    dropped whatever its cell, and the noise floor does not flip it: a question
    persisted as a memory would come back as the "answer" to the next question.
    The draw is still taken, so the sequence of draws does not depend on it.

    `active`: the item's ACT-R activation reached the persist threshold τ (plan §2.7):
    in the cells of `TAU_LIFTS` its relevance row rises one band.
    """
    if novelty not in NOVELTY_CELLS:
        raise ValueError(f"novelty must be one of {NOVELTY_CELLS}, got {novelty!r}")
    rel = relevance_cell(relevance, th)
    lifted = ""
    if active and (rel, novelty) in TAU_LIFTS:
        up = TAU_LIFTS[(rel, novelty)]
        rel, lifted = up, f"{rel} lifted to {up} (ACT-R activation >= tau); "
    draw = rng.random()
    if question:
        return CellDecision(rel, novelty, "drop", "drop", draw, 0.0, False, "none",
                            f"{lifted}{rel} x {novelty}; a question, not a fact -> drop")
    cell_action = MATRIX[(rel, novelty)]
    noise = draw < noise_rate
    action = NOISE_ALTERNATIVE[cell_action] if noise else cell_action
    reason = f"{lifted}{rel} x {novelty} -> {cell_action}"
    if noise:
        reason += f"; noise floor fired (draw {draw:.4f} < {noise_rate:.3f}) -> {action}"
    if action == "buffer" and (rounds.round_ >= rounds.max_rounds or rounds.expired):
        action = "persist"
        why = "its TTL has passed" if rounds.expired else f"round {rounds.round_} of {rounds.max_rounds}"
        reason += f"; undecided for too long ({why}) -> persist"
    return CellDecision(rel, novelty, cell_action, action, draw, noise_rate, noise,
                        PRIORITY[(rel, novelty)], reason)


def activation_lifts(act: ActivationResult, said: Utterance | None, settings: ExitGateSettings) -> bool:
    """Whether the item's ACT-R activation reached the persist threshold τ and so lifts its
    row: anything but the user's chatter and questions, whose kind decides (issue 22)."""
    if settings.persist_tau is None or (said is not None and said.kind != "statement"):
        return False
    return act.above_threshold(settings.persist_tau)


@dataclass(frozen=True)
class ItemSignals:
    """What the exit gate measured of one item besides its novelty: its relevance (charge
    bonus included), ACT-R activation, the user's kind of line, and the emotional charge."""

    relevance: float
    act: ActivationResult
    said: Utterance | None
    charge: float


def decide_item(item: ItemSignals, novelty: str, th: GateThresholds, settings: ExitGateSettings,
                rng: random.Random, rounds: BufferRounds) -> CellDecision:
    """`decide_cell` for one item of the exit gate: its kind of line (a question is dropped),
    its activation against τ, and a reason that says what the kind and the charge did."""
    said = item.said
    cell = decide_cell(item.relevance, novelty, th, settings.noise_floor, rng, rounds=rounds,
                       question=said is not None and said.kind == "question",
                       active=activation_lifts(item.act, said, settings))
    bonus = charge_bonus(item.charge, settings)
    felt = f"charge {item.charge:.2f} adds {bonus:g} to relevance; " if bonus else ""
    kind = f"{said.kind}: {said.reason}; " if said is not None else ""
    return replace(cell, reason=kind + felt + cell.reason)
