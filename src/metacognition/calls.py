"""The metacognitive calls (plan §2.11): feeling of knowing in an isolated meta-context.

The FOK question goes out through `LanguageModel.meta_call_structured`, which
takes one question string and nothing else: no history, no identity, no system
prompt of the agent's, and the answer is discarded once its signal is read. The
model judges whether it knows the answer *before* seeing any answer, so the
judgement is not anchored on a draft it would defend.

Failure is never fatal here: reflex mode (ProviderSkipped) and any provider
error give a FeelingOfKnowing without a value and the reason recorded; the
composite (src/metacognition/confidence.score_answer, the one scorer) renormalises over
the other signals.
"""

from __future__ import annotations

import logging

from pydantic import BaseModel, Field

from src.errors import ProviderError, ProviderSkipped
from src.metacognition.confidence import (
    FeelingOfKnowing,
    Judgement,
    fok_value,
)
from src.metacognition.settings import MetacognitionSettings
from src.providers.protocols import LanguageModel

log = logging.getLogger(__name__)

FOK_PURPOSE = "metacognition_fok"
#: Questions longer than this are cut for the FOK call: the judgement needs the gist.
FOK_QUESTION_CHARS = 4000

FOK_PROMPT = """Do you know the answer to the question below? Do not answer it.
Judge only your own knowledge:
- KNOWN: you know the answer and could state it correctly;
- PARTIAL: you know part of it, or you would have to guess some of it;
- UNKNOWN: you do not know it (or it depends on facts you do not have).
Also give a confidence from 0 to 1 that an answer you gave now would be correct.

Question:
<<<
{question}
>>>"""


class FokAnswer(BaseModel):
    """The meta call's reply."""

    judgement: Judgement
    confidence: float = Field(ge=0.0, le=1.0)


async def feeling_of_knowing(llm: LanguageModel | None, question: str, *,
                             settings: MetacognitionSettings | None = None) -> FeelingOfKnowing:
    """KNOWN / PARTIAL / UNKNOWN and a value in its band; never raises a ProviderError."""
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
                                               purpose=FOK_PURPOSE, max_tokens=cfg.fok_max_tokens)
    except ProviderSkipped as exc:
        log.info("feeling of knowing skipped: %s", exc)
        return FeelingOfKnowing.unavailable(f"skipped: {exc}")
    except ProviderError as exc:
        log.warning("feeling-of-knowing call failed, confidence goes without it: %s", exc)
        return FeelingOfKnowing.unavailable(f"failed: {type(exc).__name__}: {exc}")
    value = reply.value
    return FeelingOfKnowing(value.judgement, fok_value(value.judgement, value.confidence))


__all__ = ["FOK_PROMPT", "FOK_PURPOSE", "FokAnswer", "feeling_of_knowing"]
