"""The guardian's feedback on memories (plan §5.3; issue 25): `/good [id]`, `/bad [id]`.

`/good 42` (or several ids) says memory 42 was good to rely on, `/bad 42` that it was
not; without an id the feedback is about the memories behind the last answer to a user's
message: the ones it drew on (src/outcomes/use.py: a memory's own words, those the question
did not hold, are in the answer), and only those. When it drew on none, nothing is recorded
and the reply says so in words: the other memories of its context were there, not used (a
newcomer's `/good` once credited 16 imports the answer never touched). Replies name no source
file: they are read by the guardian.

Each command writes outcome evidence twice: `memory_uses` rows of kind good / bad
(valence +1 / −1), which recall's outcome scoring counts as use and consolidation folds
into the memory's utility once (src/consolidation/evolution/utility.py); and one
`feedback` outcome linked to those memories and to the decisions of the lookback before
it (src/outcomes/tracking.py), which the gut's axes and layer weights learn from. The
reply says what was recorded.
"""

from __future__ import annotations

import re
from datetime import datetime

import asyncpg

from src.outcomes import uses_repository as repo
from src.outcomes.settings import OutcomeSettings
from src.outcomes.tracking import record_outcome
from src.outcomes.use import uses_for
from src.text import excerpt

_IDS = re.compile(r"#?(\d+)")
PREVIEW_CHARS = 60
_NAME_ONE = "; name a memory: /{} <memory id>"


def usage(command: str) -> str:
    return f"usage: /{command} [memory id ...] — without an id: the memories behind the last answer"


def parse_ids(args: str) -> list[int] | None:
    """The memory ids named (`42`, `#42`, `3, 9`); [] for none; None when something else is there."""
    parts = [p for p in re.split(r"[\s,]+", args.strip()) if p]
    matched = [_IDS.fullmatch(p) for p in parts]
    if not all(matched):
        return None
    return sorted({int(m.group(1)) for m in matched if m is not None})


async def feedback_command(pool: asyncpg.Pool, args: str, *, good: bool, settings: OutcomeSettings,
                           now: datetime) -> str:
    """Run `/good` or `/bad`; the reply says what was recorded (or why nothing was)."""
    command = "good" if good else "bad"
    ids = parse_ids(args)
    if ids is None:
        return usage(command)
    target, evidence, how = await _target(pool, ids, settings, command)
    if isinstance(target, str):
        return target
    texts = await repo.memory_texts(pool, target)
    missing = [i for i in target if i not in texts]
    if missing:
        return f"no memory {', '.join(f'#{i}' for i in missing)}; nothing recorded"
    valence = 1.0 if good else -1.0
    evidence = {"by": "guardian", "command": f"/{command}", **evidence}
    await repo.insert_uses(pool, uses_for(target, command, valence, evidence), at=now,
                           session_id=None, cycle=None)
    oid = await record_outcome(
        pool, kind="feedback", valence=valence, at=now, evidence={**evidence, "memory_ids": target},
        description=f"guardian /{command} on memories {', '.join(f'#{i}' for i in target)}",
        subjects=[("memory", i) for i in target], links=settings)
    listed = "; ".join(f"#{i} '{excerpt(texts[i], PREVIEW_CHARS)}'" for i in target)
    return (f"recorded /{command} for {how}: {listed} (outcome #{oid}; it counts in their utility "
            f"at the next deep pass)")


async def _target(pool: asyncpg.Pool, ids: list[int], settings: OutcomeSettings,
                  command: str) -> tuple[list[int] | str, dict, str]:
    """(memory ids, evidence, how to name them) — or a reply saying why there are none."""
    if ids:
        return ids, {}, "memory" if len(ids) == 1 else "memories"
    answer = await repo.last_answer(pool)
    if answer is None:
        return f"no answer yet to give feedback on{_NAME_ONE.format(command)}", {}, ""
    evidence = {"answer_session": answer.session_id, "answer_cycle": answer.cycle}
    drew_on = await repo.reflected_in(pool, answer.session_id, answer.cycle)
    if drew_on:
        return drew_on, {**evidence, "behind": "drew on"}, "the memories the last answer drew on"
    context = {i for track in settings.use.tracks for i in answer.context_ids.get(track, [])}
    if not context:
        return f"the last answer had no memory in its context; nothing recorded{_NAME_ONE.format(command)}", {}, ""
    return (f"the last answer drew on none of its {len(context)} memories (none has enough of its own words in "
            f"the answer); nothing recorded{_NAME_ONE.format(command)}", {}, "")
