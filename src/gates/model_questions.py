"""Layer 3 of the exit gate: the questions it asks a model (plan §2.8, issue 37 item 3).

The contradiction question (src/gates/contradiction.py `ask_llm`) for the most similar pairs
the first two layers left undecided; for two of the user's own statements it is the relation
question instead (`ask_relation`). And for each of the user's statements, the relation
question about earlier statements of theirs below the screen: does it update, contradict or
leave standing what they said (one call a pair, src/gates/prompts.py `relation_question`)?
Whom it asks about (`to_ask`): the earlier
statement the offline cues picked (src/gates/updates.py `pick`), first, since a cue read on
another subject picks the wrong statement and the model's answer overrules it; then the
closest few (`gates.exit.relation_pairs`, at least `relation_floor` alike). Most changes are
told without a verb of change, far below the contradiction screen's similarity, where no
model was asked before: only a model knows that a Kia replaces a Ford Focus
(bench/bench_updates.py, set B: with a model that answers right, 40 -> 77.5% of the report
half's updates recognised and no distinct fact marked superseded). The first earlier
statement the model calls an update is linked (`linked`); its other answers are no verdicts
(contradictions are screened above the similarity `contradicting` only, plan §2.8). Without a
model, or with the question turned off (runtime.local.yaml: a 1.5B model answers at
chance), the cues' pick stands.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

from src.gates.contradiction import Verdict, ask_llm, ask_relation
from src.gates.evaluation import Evaluation, Neighbour
from src.gates.settings import ExitGateSettings
from src.gates.updates import GATE, judge, mark, same
from src.providers.protocols import LanguageModel
from src.providers.resilience import shared_retries

#: Why a link the model made says so (gate_decisions.details.update_of.why).
MODEL_SAID = "layer 3: the model said the newer updates it"


def to_ask(newer: str, earlier: Sequence[Neighbour], most: int, floor: float,
           offline: Neighbour | None = None) -> list[Neighbour]:
    """The user's earlier statements a model is asked the relation question about: the one the
    offline judge picked (`offline`), then the closest `most` at least `floor` alike
    (`earlier` is closest first), but for those the judge ruled out by form ("also",
    "never")."""
    out: list[Neighbour] = [offline] if offline is not None else []
    for n in earlier:
        if len(out) >= most + (offline is not None) or n.similarity < floor:
            break
        if not same(n, out) and not judge(n.content, newer, n.similarity, GATE).by_form:
            out.append(n)
    return out


def linked(offline: Neighbour | None, answers: Sequence[tuple[Neighbour, str | None]]) -> Neighbour | None:
    """The earlier statement a statement updates, from the model's answers in the order asked
    (the cues' pick first, then closest first; None: no answer): the first it called an
    update; else the cues' pick, unless the model answered about it (any other answer
    overrules the cue)."""
    for n, relation in answers:
        if relation == "update":
            return n
    if offline is not None and not same(offline, [n for n, relation in answers if relation is not None]):
        return offline
    return None


def plan(evaluations: Sequence[Evaluation], screened: Sequence[tuple[Evaluation, int]],
         settings: ExitGateSettings) -> list[tuple[Evaluation, Neighbour]]:
    """The (statement, earlier statement) pairs to ask about: `to_ask` for each user statement
    with no opposed pair, but for the pairs the screen's layer 3 asks already (`screened`)."""
    out: list[tuple[Evaluation, Neighbour]] = []
    for e in evaluations:
        if not e.earlier or any(v.contradicts for _, v in e.verdicts):
            continue
        asked = [e.verdicts[k][0] for f, k in screened if f is e]
        offline = e.update_offline[0] if e.update_offline is not None else None
        out += [(e, n) for n in to_ask(e.item.content, e.earlier, settings.relation_pairs,
                                       settings.relation_floor, offline) if not same(n, asked)]
    return out


def take(asks: Sequence[tuple[Evaluation, Neighbour]], answers: Sequence[tuple[Verdict, str | None]],
         said: dict[int, list[tuple[Neighbour, str | None]]]) -> None:
    """Note the model's answers in `said` (by `id(e)`, in the order asked), count the calls,
    keep a call's one-line summary."""
    for (e, n), (verdict, relation) in zip(asks, answers, strict=True):
        if verdict.layer != "llm":
            continue
        e.llm_calls += 1
        said.setdefault(id(e), []).append((n, relation))
        if verdict.summary and e.compressed is None:
            e.compressed, e.compressed_by = verdict.summary, "llm"


async def ask(llm: LanguageModel, evaluations: list[Evaluation], settings: ExitGateSettings) -> None:
    """Layer 3 for the most similar undecided pairs of items that have no opposed pair (the
    contradiction question; for two of the user's statements the relation question), and the
    relation question for the user's statements below the screen (`plan`)."""
    relating = llm.configured and settings.relation_pairs > 0
    if not relating:        # reflex mode (or the question turned off): the cues decide
        for e in evaluations:
            if e.update_offline is not None:
                mark(e, *e.update_offline)
    asks: list[tuple[Evaluation, int]] = []
    for e in evaluations:
        if any(v.contradicts for _, v in e.verdicts):
            continue
        undecided = [k for k, (_, v) in enumerate(e.verdicts) if v.contradicts is None]
        asks += [(e, k) for k in undecided[: settings.llm_pairs_per_item]]
    relating_asks = plan(evaluations, asks, settings) if relating else []
    limit = asyncio.Semaphore(settings.llm_concurrency)
    said: dict[int, list[tuple[Neighbour, str | None]]] = {}     # id(e) -> the model's relation answers

    async def screened(e: Evaluation, k: int) -> Verdict:
        (n, v), relation = e.verdicts[k], None
        async with limit:   # the user's older statement: one call tells update, contradiction, neither
            if e.update_of is None and same(n, e.earlier):
                v, relation = await ask_relation(llm, e.item.content, n.content, v.opposition)
            else:
                v = await ask_llm(llm, e.item.content, n.content, v.opposition)
        if relation is not None:
            said.setdefault(id(e), []).append((n, relation))
        return v

    async def ask_update(e: Evaluation, n: Neighbour) -> tuple[Verdict, str | None]:
        async with limit:
            return await ask_relation(llm, e.item.content, n.content, None)

    # a rate limit hits these calls together: they share one retry budget
    with shared_retries(settings.llm_shared_retries):
        answers, relations = await asyncio.gather(
            asyncio.gather(*(screened(e, k) for e, k in asks)),
            asyncio.gather(*(ask_update(e, n) for e, n in relating_asks)))
    take(relating_asks, relations, said)
    for e in evaluations:
        if e.update_of is not None:             # the cues decided (not relating)
            continue
        offline = e.update_offline[0] if e.update_offline is not None else None
        # the cues' pick first, then closest first (a screened pair is among the closest)
        heard = sorted(said.get(id(e), []), key=lambda a: (not same(a[0], [offline] if offline else []),
                                                            -a[0].similarity))
        chosen = linked(offline, heard)
        if chosen is not None:
            by_model = any(same(chosen, [n]) and r == "update" for n, r in heard)
            mark(e, chosen, MODEL_SAID if by_model else e.update_offline[1])
    for (e, k), verdict in zip(asks, answers, strict=True):
        if e.update_of is not None and same(e.verdicts[k][0], [e.update_of]):
            verdict = replace(verdict, contradicts=False)
        e.verdicts[k] = (e.verdicts[k][0], verdict)
        if verdict.layer == "llm":
            e.llm_calls += 1
            if verdict.summary and e.compressed is None:
                e.compressed, e.compressed_by = verdict.summary, "llm"
