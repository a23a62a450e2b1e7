"""Layer 3 of the exit gate: the questions it asks a model (plan §2.8, issue 37 item 3).

The contradiction question (src/gates/contradiction.py `ask_llm`) for the most similar pairs
the first two layers left undecided, but for a user's statement: one relation question
(`ask_relations`, src/gates/prompts.py `relations_question`) asks, in one call, which of the
user's earlier statements it updates and which it contradicts, numbered. Whom it asks about
(`to_ask`): the earlier statement the offline cues picked (src/gates/updates.py `pick`),
since a cue read on another subject picks the wrong statement and the model's answer
overrules it; the closest few (`gates.exit.relation_pairs`, at least `relation_floor` alike);
and the pairs above the contradiction screen's similarity the screen left undecided (their
verdicts come from the same answer). Most changes are told without a verb of change, far
below the screen, where no model was asked before: only a model knows that a Kia replaces a
Ford Focus. Many are not even among the closest ("Charging the Kia at the supermarket…" is
nearer the user's shopping than their Focus), so the answer also says what the statement is
about ("my car"); when it names no update, a second call asks about the user's earlier
statements nearest that phrase (`second_look`, `relation_about`). The earlier statement the
model calls an update is linked (`linked`); its other answers below the screen are no
verdicts (contradictions are screened above the similarity `contradicting` only, plan §2.8).
Without a model, or with the question turned off (runtime.local.yaml: a 1.5B model answers
at chance), the cues' pick stands. Measured in bench/bench_updates.py (notes.md "### time and
truth").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from src.db.sql import Executor
from src.errors import ProviderError
from src.gates.contradiction import Relations, Verdict, ask_llm, ask_relations
from src.gates.evaluation import Evaluation, Neighbour
from src.gates.settings import ExitGateSettings
from src.gates.updates import GATE, earlier_statements, mark, same
from src.providers.protocols import Embedder, LanguageModel
from src.providers.resilience import shared_retries

log = logging.getLogger(__name__)

#: Why a link the model made says so (gate_decisions.details.update_of.why).
MODEL_SAID = "layer 3: the model said the newer updates it"


def to_ask(earlier: Sequence[Neighbour], most: int, floor: float,
           offline: Neighbour | None = None) -> list[Neighbour]:
    """The user's earlier statements a model is asked the relation question about: the one the
    offline judge picked (`offline`), then the closest `most` at least `floor` alike
    (`earlier` is closest first). Those the judge rules out by form are asked too: its
    "whole life" words are said of habits ("the best teacher he's ever had" after "Josh's
    teacher is Mr. Reid", "Oat latte is my usual" after "I always order a flat white"), and
    a model reads "also" as well as the cues do."""
    out: list[Neighbour] = [offline] if offline is not None else []
    for n in earlier:
        if len(out) >= most + (offline is not None) or n.similarity < floor:
            break
        if not same(n, out):
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


@dataclass
class Ask:
    """One relation question: a user's statement `e` and the earlier statements of theirs it is
    asked about (the cues' pick first, then closest first); `screened`: the indices of
    `e.verdicts` among them, whose verdicts the answer gives."""

    e: Evaluation
    earlier: list[Neighbour]
    screened: list[int]


def plan(evaluations: Sequence[Evaluation], settings: ExitGateSettings, relating: bool
         ) -> tuple[list[tuple[Evaluation, int]], list[Ask]]:
    """What layer 3 asks: the contradiction question of each undecided pair above the screen
    (`llm_pairs_per_item` of the most similar, for items with no opposed pair) that is not of
    two of the user's statements; and one relation question for each user statement, about
    its screened earlier statements and (`relating`) those `to_ask` names."""
    singles: list[tuple[Evaluation, int]] = []
    asks: list[Ask] = []
    for e in evaluations:
        if any(v.contradicts for _, v in e.verdicts):
            continue
        undecided = [k for k, (_, v) in enumerate(e.verdicts) if v.contradicts is None]
        undecided = undecided[: settings.llm_pairs_per_item]
        # the user's older statement: the relation question tells update, contradiction, neither
        own = [k for k in undecided if e.update_of is None and same(e.verdicts[k][0], e.earlier)]
        singles += [(e, k) for k in undecided if k not in own]
        offline = e.update_offline[0] if e.update_offline is not None else None
        earlier = to_ask(e.earlier, settings.relation_pairs, settings.relation_floor, offline) if relating else []
        screened = [e.verdicts[k][0] for k in own]
        earlier += [n for n in screened if not same(n, earlier)]
        if earlier:
            asks.append(Ask(e, earlier, own))
    return singles, asks


def take(ask: Ask, answer: Relations) -> list[tuple[Neighbour, str | None]]:
    """The model's answer to one relation question: each earlier statement with its relation
    (None: no answer), the verdicts of the screened pairs among them, the call counted and
    its one-line summary kept."""
    e = ask.e
    said = list(zip(ask.earlier, answer.relations, strict=True))
    for k in ask.screened:
        n, v = e.verdicts[k]
        relation = next(r for m, r in said if same(m, [n]))
        e.verdicts[k] = (n, replace(v, contradicts=None if relation is None else relation == "contradiction",
                                    layer=answer.layer, summary=answer.summary))
    if answer.layer == "llm":
        e.llm_calls += 1
        if answer.summary and e.compressed is None:
            e.compressed, e.compressed_by = answer.summary, "llm"
    return said


#: The user's earlier statements nearest each (when a statement was said, what the model said
#: it is about), said before it, closest first (`by_about`).
Find = Callable[[Sequence[tuple[datetime | None, str]]], Awaitable[list[list[Neighbour]]]]


def by_about(db: Executor, embedder: Embedder, most: int, floor: float):
    """A `Find`: for each (when a statement was said, what the model
    said it is about: "my car"), the user's statements nearest that phrase, said before it, closest first
    (at most `most`, at least `floor` alike). Most changes share few words with what they
    change ("Charging the Kia…" after "I drive a 2012 Ford Focus"); what both are about is
    near both. An embedding outage finds nothing: the first question's answer stands."""
    th = replace(GATE, candidates=most, floor=floor)

    async def find(asked: Sequence[tuple[datetime | None, str]]) -> list[list[Neighbour]]:
        try:
            vecs = await embedder.embed([phrase for _, phrase in asked], "RETRIEVAL_QUERY")
        except ProviderError as exc:
            log.warning("the relation question's second look skipped: %s", exc)
            return [[] for _ in asked]
        found = await earlier_statements(db, list(vecs), embedder.model_name, th)
        return [[Neighbour(x.similarity, x.content, memory_id=x.memory_id) for x in near if x.at is None or said is None or x.at <= said]
                for (said, _), near in zip(asked, found, strict=True)]
    return find


def second_look(asked: Sequence[Neighbour], near: Sequence[Neighbour], most: int) -> list[Neighbour]:
    """Whom the second relation question asks about: the earlier statements nearest what the
    model said the statement is about (`near`, closest first), at most `most` not in the first."""
    return [n for n in near if not same(n, asked)][:most]


def follow_up(asks: Sequence[Ask], found: Sequence[list[Neighbour]], most: int) -> list[Ask]:
    """The second relation question of each statement in `asks` (`found`: one list each)."""
    return [Ask(a.e, new, []) for a, near in zip(asks, found, strict=True)
            if (new := second_look(a.earlier, near, most))]


def _about(answer: Relations) -> str | None:
    """What the statement is about, when its first question named no update."""
    return answer.about if answer.layer == "llm" and "update" not in answer.relations else None


async def ask(llm: LanguageModel, evaluations: list[Evaluation], settings: ExitGateSettings,
              find: Find | None = None) -> None:
    """Layer 3: the contradiction question of the most similar undecided pairs of items that
    have no opposed pair, and for each user statement one relation question (`plan`); a
    second about the earlier statements nearest what the model said it is about, when the
    first named no update (`find`, `gates.exit.relation_about`)."""
    relating = llm.configured and settings.relation_pairs > 0
    if not relating:        # reflex mode (or the question turned off): the cues decide
        for e in evaluations:
            if e.update_offline is not None:
                mark(e, *e.update_offline)
    singles, asks = plan(evaluations, settings, relating)
    limit = asyncio.Semaphore(settings.llm_concurrency)

    async def contradiction(e: Evaluation, k: int) -> Verdict:
        async with limit:
            return await ask_llm(llm, e.item.content, e.verdicts[k][0].content, e.verdicts[k][1].opposition)

    async def relations(a: Ask) -> Relations:
        async with limit:
            return await ask_relations(llm, a.e.item.content, [n.content for n in a.earlier])

    # a rate limit hits these calls together: they share one retry budget
    with shared_retries(settings.llm_shared_retries):
        verdicts, answers = await asyncio.gather(asyncio.gather(*(contradiction(e, k) for e, k in singles)),
                                                 asyncio.gather(*(relations(a) for a in asks)))
        said = {id(a.e): take(a, answer) for a, answer in zip(asks, answers, strict=True)}
        about = {id(a.e): phrase for a, answer in zip(asks, answers, strict=True)
                 if relating and (phrase := _about(answer)) is not None}
        second: list[Ask] = []
        if about and find is not None and settings.relation_about > 0:
            firsts = [a for a in asks if id(a.e) in about]
            found = await find([(a.e.item.created_at, about[id(a.e)]) for a in firsts])
            second = follow_up(firsts, found, settings.relation_about)
        for a, answer in zip(second, await asyncio.gather(*(relations(a) for a in second)), strict=True):
            said[id(a.e)] = said.get(id(a.e), []) + take(a, answer)
    for e in evaluations:
        if e.update_of is not None:             # the cues decided (not relating)
            continue
        offline = e.update_offline[0] if e.update_offline is not None else None
        chosen = linked(offline, said.get(id(e), []))
        if chosen is not None:
            by_model = any(same(chosen, [n]) and r == "update" for n, r in said.get(id(e), []))
            reason = MODEL_SAID + (f" (asked by what it is about: {about[id(e)]})"
                                   if by_model and id(e) in about else "")
            mark(e, chosen, reason if by_model else e.update_offline[1])
    for (e, k), verdict in zip(singles, verdicts, strict=True):
        if e.update_of is not None and same(e.verdicts[k][0], [e.update_of]):
            verdict = replace(verdict, contradicts=False)       # a change is no contradiction
        e.verdicts[k] = (e.verdicts[k][0], verdict)
        if verdict.layer == "llm":
            e.llm_calls += 1
            if verdict.summary and e.compressed is None:
                e.compressed, e.compressed_by = verdict.summary, "llm"
