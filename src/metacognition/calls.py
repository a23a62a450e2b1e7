"""The metacognitive calls (plan §2.11): feeling of knowing in an isolated meta-context.

The FOK question (`FOK_PROMPT`, src/metacognition/prompts.py) goes out through
`LanguageModel.meta_call_structured`, which takes one question string and nothing else:
no history, no identity, no system prompt of the agent's, and the answer is discarded
once its signal is read. The model judges whether it knows the answer *before* seeing
any answer, so the judgement is not anchored on a draft it would defend.

Failure is never fatal here: reflex mode (ProviderSkipped) and any provider
error give a FeelingOfKnowing without a value and the reason recorded; the
composite (src/metacognition/confidence.score_answer, the one scorer) renormalises over
the other signals.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from src.errors import ProviderError, ProviderSkipped
from src.metacognition.confidence import FeelingOfKnowing, fok_value
from src.metacognition.prompts import FOK_PROMPT, FokAnswer
from src.metacognition.settings import MetacognitionSettings
from src.providers.caller import INTERNAL, Caller
from src.providers.protocols import LanguageModel

log = logging.getLogger(__name__)

FOK_PURPOSE = "metacognition_fok"
#: Questions longer than this are cut for the FOK call: the judgement needs the gist.
FOK_QUESTION_CHARS = 4000


async def feeling_of_knowing(llm: LanguageModel | None, question: str, *,
                             settings: MetacognitionSettings | None = None,
                             caller: Caller = INTERNAL) -> FeelingOfKnowing:
    """KNOWN / PARTIAL / UNKNOWN and a value in its band, asked as `caller`'s call (the turn's
    own: a user's turn goes first at the endpoint); never raises a ProviderError."""
    cfg = settings or MetacognitionSettings()
    if llm is None or not llm.configured:
        reason = "no language model is configured (reflex mode)"
        log.info("feeling of knowing skipped: %s", reason)
        return FeelingOfKnowing.unavailable(reason)
    text = question.strip()[:FOK_QUESTION_CHARS]
    if not text:
        return FeelingOfKnowing.unavailable("empty question")
    try:
        reply = await llm.meta_call_structured(FOK_PROMPT.format(question=text), FokAnswer,
                                               purpose=FOK_PURPOSE, max_tokens=cfg.fok_max_tokens,
                                               caller=caller)
    except ProviderSkipped as exc:
        log.info("feeling of knowing skipped: %s", exc)
        return FeelingOfKnowing.unavailable(f"skipped: {exc}")
    except ProviderError as exc:
        log.warning("feeling-of-knowing call failed, confidence goes without it: %s", exc)
        return FeelingOfKnowing.unavailable(f"failed: {type(exc).__name__}: {exc}")
    value = reply.value
    return FeelingOfKnowing(value.judgement, fok_value(value.judgement, value.confidence))


FokSource = Callable[[], Awaitable[FeelingOfKnowing]]


def fok_once(llm: LanguageModel | None, question: str, *,
             settings: MetacognitionSettings | None = None, caller: Caller = INTERNAL) -> FokSource:
    """One FOK call per turn: every caller awaits the same call. Tool rounds answer the
    same focus again; the judgement is about the focus, so asking again would only cost
    (issue 11 item 10). A caller cancelled mid-wait does not cancel the shared call."""
    task: asyncio.Task[FeelingOfKnowing] | None = None

    async def get() -> FeelingOfKnowing:
        nonlocal task
        if task is None:
            task = asyncio.ensure_future(feeling_of_knowing(llm, question, settings=settings, caller=caller))
        return await asyncio.shield(task)

    return get


__all__ = ["FOK_PROMPT", "FOK_PURPOSE", "FokAnswer", "FokSource", "feeling_of_knowing", "fok_once"]
