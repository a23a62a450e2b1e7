"""LLM output the deep pass can trust (issue 13, item 4).

Every consolidation call is an isolated meta-context call answered as JSON with a
pydantic schema, recorded in `llm_calls` with purpose `consolidation:<phase>`.
A reply that is malformed or partial gets one repair round with the error shown to
the model (ResilientLanguageModel.generate_structured); if that fails too, the batch
is split in halves and each half asked again. Each reply's output cap is sized from its
schema and the items asked about (src/providers/reply_cap.py); a reply the cap cut is not
repaired at the same cap: a batch is split, a single item asked once more at twice the cap
(issue 38 item 6); a single item that still fails is
skipped with a `consolidation_failures` row. A reply whose citations name ids that
were not in the input is treated the same way (`validate` raises Rejected): nothing
is half-written, nothing is silently dropped. Any other provider error fails the phase
(phase.py).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from src.consolidation.deep import checkpoints
from src.consolidation.deep.phase import DeepPassContext, calls_made, interrupts
from src.consolidation.deep.prompts import Insights, insights_prompt
from src.errors import ContextOverflow, MalformedOutput, ProviderError, ProviderSkipped, ReplyCut
from src.providers.context_window import window_of
from src.providers.reply_cap import reply_tokens

log = logging.getLogger(__name__)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class Rejected(MalformedOutput):
    """A well-formed reply whose content cannot be used (e.g. a citation not in the input)."""


class PartlyRejected(Rejected):
    """A batch's reply whose answers for some items cannot be used while the others can
    (issue 40 item 6): `rejected` items got an unusable answer (recorded, not asked again
    in this pass), `missing` items got none (asked again, alone); the rest are kept."""

    def __init__(self, message: str, *, rejected: Sequence[Any] = (), missing: Sequence[Any] = ()):
        super().__init__(message)
        self.rejected = list(rejected)
        self.missing = list(missing)


def check_citations(cited: Sequence[int], allowed: set[int], what: str) -> None:
    """Raise Rejected when `cited` is empty or names an id not in `allowed`."""
    unknown = sorted(set(cited) - allowed)
    if unknown:
        raise Rejected(f"{what} cites memory ids not in the input: {unknown}")
    if not cited:
        raise Rejected(f"{what} cites no memory ids")


def check_one_each(wanted: set[int], got: set[int], *, answers: str, answer: str, noun: str) -> None:
    """Raise Rejected unless the reply answered exactly the input's ids, one each: an id
    the input did not have is invented, a missing one would be silently dropped."""
    if got - wanted:
        raise Rejected(f"{answers} name {noun} ids not in the input: {sorted(got - wanted)}")
    if wanted - got:
        raise Rejected(f"no {answer} for {noun} id(s) {sorted(wanted - got)}")


@dataclass(frozen=True)
class BatchQuestion(Generic[T, M]):
    """What to ask of each batch: its prompt, the reply's schema, the check a reply must pass.

    The reply's output cap is sized from the schema and the batch (src/providers/reply_cap.py):
    `answers_per_item` entries of its outer array per item asked about (a question's `n`
    insights), unless `max_tokens` fixes it."""

    question: Callable[[Sequence[T]], str]
    schema: type[M]
    validate: Callable[[Sequence[T], M], None] | None = None
    max_tokens: int | None = None
    answers_per_item: int = 1

    def cap(self, batch: Sequence[T]) -> int:
        """The output cap of the reply to `batch`."""
        return self.max_tokens or reply_tokens(self.schema, len(batch) * self.answers_per_item)


async def ask_batched(
    ctx: DeepPassContext,
    items: Sequence[T],
    ask: BatchQuestion[T, M],
    *,
    batch_size: int,
    describe: Callable[[T], Any] = repr,
    on_answer: Callable[[list[T], M], Awaitable[None]] | None = None,
    on_rejected: Callable[[list[T], str], Awaitable[None]] | None = None,
) -> list[tuple[list[T], M]]:
    """Ask `ask` of `items`, a batch at a time; return (batch, validated answer) for every usable batch.

    Stops asking (and logs the step as skipped) when the pass's call budget is spent.
    `describe` names an item in the failure row of a batch that could not be answered.
    `on_answer` sees each validated answer as soon as it is paid for (a phase saves it
    there, so a pass killed before the last batch keeps the answers it bought).
    A reply `validate` rejects only in part (PartlyRejected) is kept for its other items
    (`on_answer` sees only those); its rejected and missing items are asked again, alone. An
    item rejected when asked alone gets a failure row and `on_rejected` (a phase records it
    there, so a resumed pass does not ask it again).
    """
    answered: list[tuple[list[T], M]] = []
    queue: list[list[T]] = [list(items[i:i + batch_size]) for i in range(0, len(items), batch_size)]
    while queue:
        batch = queue.pop(0)
        if not ctx.budget.can_spend(1):
            ctx.skip(f"{ctx.phase}:budget", f"the pass's {ctx.budget.limit} LLM calls are spent; "
                     f"{sum(len(b) for b in [batch, *queue])} item(s) wait for the next pass")
            break
        try:
            value = await _ask_once(ctx, batch, ask)
            if ask.validate is not None:
                ask.validate(batch, value)
        except PartlyRejected as problem:
            kept = await _keep_part(ctx, batch, problem, queue, describe, on_rejected)
            if kept:
                if on_answer is not None:
                    await on_answer(kept, value)
                answered.append((kept, value))
            continue
        except (MalformedOutput, ContextOverflow) as problem:
            await _unusable(ctx, batch, problem, queue, describe, on_rejected)
            continue
        except ProviderSkipped as exc:
            if interrupts(exc):
                raise
            ctx.skip(ctx.phase, str(exc))
            break
        except ProviderError as exc:
            # an outage or a refused request: the rest of this phase would fail the same
            # way, so the phase fails (the pass backs off and resumes it; the answers
            # already paid for are saved by `on_answer`)
            ctx.budget.spend(calls_made(exc))
            await _save_spend(ctx)
            raise
        if on_answer is not None:
            await on_answer(batch, value)
        answered.append((batch, value))
    return answered


async def _keep_part(ctx: DeepPassContext, batch: list[T], problem: PartlyRejected, queue: list[list[T]],
                     describe: Callable[[T], Any],
                     on_rejected: Callable[[list[T], str], Awaitable[None]] | None) -> list[T]:
    """A reply rejected in part: the items whose answers stand are returned; a rejected item of
    a larger batch and a missing one are asked once more, alone (a model corrects itself more
    often than not when asked about one thing); one rejected when asked alone is recorded."""
    rejected = [x for x in batch if any(x is r for r in problem.rejected)]
    missing = [x for x in batch if any(x is m for m in problem.missing)]
    kept = [x for x in batch if not any(x is r for r in rejected + missing)]
    # the counts at INFO; what was rejected names memories' words, so at DEBUG (issue 39)
    log.info("deep pass %d %s: %d of %d answers kept, %d rejected, %d missing",
             ctx.pass_id, ctx.phase, len(kept), len(batch), len(rejected), len(missing))
    log.debug("deep pass %d %s: %s", ctx.pass_id, ctx.phase, problem)
    again = rejected + missing if len(batch) > 1 else missing
    if rejected and len(batch) == 1:
        await _rejected(ctx, rejected, str(problem), describe, on_rejected)
    elif rejected:      # what the model got wrong stays on record, though it is asked again
        await checkpoints.record_failure(ctx.pool, ctx.pass_id, ctx.phase, f"asked again alone: {problem}",
                                         [describe(x) for x in rejected])
    queue[:0] = [[x] for x in batch if any(x is a for a in again)]
    return kept


async def _unusable(ctx: DeepPassContext, batch: list[T], problem: Exception, queue: list[list[T]],
                    describe: Callable[[T], Any],
                    on_rejected: Callable[[list[T], str], Awaitable[None]] | None) -> None:
    """An unusable reply, or a batch over the model's window (not sent): fewer at a time, and
    an item still unusable alone is recorded as rejected."""
    # a Rejected names what the answer lost (the memories' names and numbers): the log says
    # the kind, the words go to DEBUG and the failure row (issue 39)
    log.debug("deep pass %d %s: %s", ctx.pass_id, ctx.phase, problem)
    if len(batch) > 1:
        half = len(batch) // 2
        log.info("deep pass %d %s: unusable reply for %d items (%s); splitting the batch",
                 ctx.pass_id, ctx.phase, len(batch), type(problem).__name__)
        queue[:0] = [batch[:half], batch[half:]]
        return
    log.warning("deep pass %d %s: skipping an item after repair and split (%s; "
                "consolidation_failures says why)", ctx.pass_id, ctx.phase, type(problem).__name__)
    await _rejected(ctx, batch, str(problem), describe, on_rejected)


async def _rejected(ctx: DeepPassContext, items: list[T], problem: str, describe: Callable[[T], Any],
                    on_rejected: Callable[[list[T], str], Awaitable[None]] | None) -> None:
    await checkpoints.record_failure(ctx.pool, ctx.pass_id, ctx.phase, problem, [describe(x) for x in items])
    if on_rejected is not None:
        await on_rejected(items, problem)


async def _ask_once(ctx: DeepPassContext, batch: Sequence[T], ask: BatchQuestion[T, M]) -> M:
    """One batch's reply. A reply its cap cut (ReplyCut) is not repaired: a batch of several is
    split by the caller; a single item is asked once more at twice the cap, when the model's
    window allows a larger reply, or else recorded as rejected."""
    cap = ask.cap(batch)
    try:
        return await _ask_at(ctx, batch, ask, cap)
    except ReplyCut as cut:
        larger = _larger_cap(ctx, cut.cap)
        if len(batch) > 1 or larger is None or not ctx.budget.can_spend(1):
            raise
        log.info("deep pass %d %s: a reply stopped at its cap of %d tokens; asking again at %d",
                 ctx.pass_id, ctx.phase, cut.cap, larger)
        return await _ask_at(ctx, batch, ask, larger)


def _larger_cap(ctx: DeepPassContext, cap: int) -> int | None:
    """Twice `cap`, as far as the model's window lets a reply grow; None when it cannot."""
    window = window_of(ctx.llm)
    larger = window.reply_cap(2 * cap) if window is not None else 2 * cap
    return larger if larger > cap else None


async def _ask_at(ctx: DeepPassContext, batch: Sequence[T], ask: BatchQuestion[T, M], cap: int) -> M:
    assert ctx.llm is not None
    try:
        got = await ctx.llm.meta_call_structured(ask.question(batch), ask.schema, purpose=ctx.purpose,
                                                 max_tokens=cap)
    except ReplyCut:
        ctx.budget.spend(1)          # cut replies are not repaired
        await _save_spend(ctx)
        raise
    except MalformedOutput:
        ctx.budget.spend(2)          # the first reply and its repair
        await _save_spend(ctx)
        raise
    ctx.budget.spend(2 if got.repaired else 1, got.result.tokens_in, got.result.tokens_out)
    await _save_spend(ctx)
    return got.value


async def _save_spend(ctx: DeepPassContext) -> None:
    b = ctx.budget
    await checkpoints.save_calls(ctx.pool, ctx.pass_id, b.used, b.tokens_in, b.tokens_out)


def run_guarded(ctx: DeepPassContext, step: str) -> bool:
    """True when an LLM step may run; otherwise it is logged as skipped (once per pass)."""
    if ctx.llm is None or not getattr(ctx.llm, "configured", False):
        ctx.skip(step, "no language model is configured (reflex mode)")
        return False
    if not ctx.budget.can_spend(1):
        ctx.skip(step, f"the pass's {ctx.budget.limit} LLM calls are spent")
        return False
    return True


async def ask_insights(ctx: DeepPassContext, question: str, evidence: Sequence[Any],
                       describe: dict[str, Any]) -> tuple[list[Any], int]:
    """One question's insights over `evidence` (each `.id` citable, nothing else), validated
    and saved like every batched answer; with the calls it spent. The insights phase and
    the DMN's associations (`dmn_inputs.py`) ask the same way: each statement dated against
    the pass's `now`, one a newer statement updated marked earlier (prompts.insights_prompt)."""
    allowed = {e.id for e in evidence}

    def validate(_b: Sequence, ans: Insights) -> None:
        if not ans.insights:
            raise Rejected("no insights")
        for k, one in enumerate(ans.insights):
            if not one.insight.strip():
                raise Rejected(f"insight {k} is empty")
            check_citations(one.cited_ids, allowed, f"insight {k}")

    before = ctx.budget.used
    got = await ask_batched(ctx, [question], BatchQuestion(
        question=lambda b: insights_prompt(b[0], evidence, ctx.settings.deep.insights_per_question, ctx.now),
        schema=Insights, validate=validate, answers_per_item=ctx.settings.deep.insights_per_question),
        batch_size=1, describe=lambda _q: describe)
    return got, ctx.budget.used - before
