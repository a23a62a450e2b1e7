"""The template of a deep-pass phase that rewrites items one answer each (plan §4.2).

Narrative synthesis (one story per merge insight) and re-compression (one line per
memory) are the same phase with other words: find the candidates and count them, skip
offline or without budget, give each candidate its context, ask the model in batches
for exactly one text per item id (`check_one_each`: none invented, none dropped), count
the calls, write each batch's answers. They were written twice by copy (issue 23); each
module now says only what differs: its candidates, its question, how it writes.

An answer reaches `write` as (item id, text) pairs, so `validate` is the template's too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from src.consolidation.deep.phase import DeepPassContext, PhaseResult
from src.consolidation.deep.structured import (
    BatchQuestion,
    ask_batched,
    check_one_each,
    run_guarded,
)

C = TypeVar("C")                        # a candidate row, as the repository returns it
M = TypeVar("M", bound=BaseModel)       # the reply's schema

Item = dict[str, Any]                   # a candidate with its context; `id` is the item id
Pairs = list[tuple[int, str]]           # one reply as (item id, text)


@dataclass(frozen=True)
class PerItemPhase(Generic[C, M]):
    """One phase: `run(ctx)` is what the deep pass calls.

    `nouns` name the reply's parts for the rejection messages (check_one_each's
    `answers`, `answer`, `noun`: "narratives", "narrative", "insight").
    """

    step: str
    candidates: Callable[[DeepPassContext], Awaitable[Sequence[C]]]
    items: Callable[[DeepPassContext, Sequence[C]], Awaitable[list[Item]]]
    batch_size: Callable[[DeepPassContext], int]
    question: Callable[[Sequence[Item]], str]
    schema: type[M]
    pairs: Callable[[M], Pairs]
    nouns: tuple[str, str, str]
    describe_key: str
    write: Callable[[DeepPassContext, Pairs, PhaseResult], Awaitable[None]]

    async def run(self, ctx: DeepPassContext) -> PhaseResult:
        result = PhaseResult()
        candidates = await self.candidates(ctx)
        result.add("candidates", len(candidates))
        if not candidates or not run_guarded(ctx, self.step):
            return result
        items = await self.items(ctx, candidates)
        before = ctx.budget.used
        ask = BatchQuestion(question=self.question, schema=self.schema, validate=self.validate)
        answers = await ask_batched(ctx, items, ask, batch_size=self.batch_size(ctx),
                                    describe=lambda it: {self.describe_key: it["id"]})
        result.calls = ctx.budget.used - before
        for _, answer in answers:
            await self.write(ctx, self.pairs(answer), result)
        return result

    def validate(self, items: Sequence[Item], answer: M) -> None:
        """Exactly one non-blank text per item id (raises Rejected: the batch is split and asked again)."""
        answers, one, noun = self.nouns
        check_one_each({it["id"] for it in items}, {i for i, text in self.pairs(answer) if text.strip()},
                       answers=answers, answer=one, noun=noun)
