"""Questions with a time (issue 37 item 2): the period a question names narrows and boosts recall.

"What did I do last week?" shares no word with "I went hiking in the Peak District": neither
search arm finds the week's events, which are what the question asks for. When the question
names a period (src/recall/timeframe.py `question_time`: "yesterday", "last week", "in May",
"two years ago", "before <date>"):
- **narrows**: the memories of that period, nearest the question's vector first, join the
  candidates (`in_frame`, one statement beside the hybrid search; at most `FRAME_ROWS` of the
  period's newest are compared: a period of years holds too many to read each turn);
- **boosts**: a candidate whose time (src/recall/when.py `memory_time`: when it happened,
  else when it was said) falls in the period scores `frame_boost` times its weight.
A question that asks *when* ("When did I move to Leeds?") names no period; the answer is the
date of the memory that holds the event, and every memory line the model reads carries it
(src/context/tracks.py). Such a question favours, by `when_boost`, a memory whose own words
name a time ("on 5 March", "last Tuesday"): it dates the event more exactly than the day it
was said.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

import numpy as np

from src.db.sql import Executor
from src.recall.hit import SearchHit
from src.recall.scoring import Recalled
from src.recall.search import query_vector
from src.recall.timeframe import TimeFrame, asks_when, question_time
from src.recall.when import memory_time

#: The newest memories of a named period compared with the question (bounds a turn's cost).
FRAME_ROWS = 5000

IN_FRAME_SQL = """
SELECT id FROM (
    SELECT id, CASE WHEN embed_model = $6::text THEN embedding END AS embedding FROM memories
     WHERE COALESCE(event_time, created_at) >= COALESCE($1::timestamptz, '-infinity')
       AND COALESCE(event_time, created_at) < COALESCE($2::timestamptz, 'infinity')
     ORDER BY COALESCE(event_time, created_at) DESC
     LIMIT $5::int) recent
ORDER BY embedding <=> $3::halfvec NULLS LAST, id DESC
LIMIT $4::int
"""


async def in_frame(db: Executor, frame: TimeFrame, query_vec: np.ndarray | None, *, embed_model: str,
                   limit: int) -> list[int]:
    """The ids of the period's memories nearest the question (the newest first without a vector)."""
    rows = await db.fetch(IN_FRAME_SQL, frame.start, frame.end, query_vector(query_vec), limit, FRAME_ROWS,
                          embed_model)
    return [r["id"] for r in rows]


def boost_in_frame(scored: list[Recalled], frame: TimeFrame | None, factor: float) -> list[Recalled]:
    """Each candidate whose time falls in `frame` weighted `factor` times."""
    if frame is None or factor == 1.0:
        return scored
    return [replace(r, weighted=r.weighted * factor) if _holds(frame, r.hit) else r for r in scored]


#: Whether a memory's words name a time, by (id, words, time): reading them costs ~0.5 ms
#: (p99 ~6 ms) a memory, and a memory's words rarely change (the key holds them: another
#: database's memory of the same id is another key). Bounded; the oldest entries go first.
_NAMES_A_TIME: OrderedDict[tuple[int, int, datetime | None], bool] = OrderedDict()
NAMES_A_TIME_CACHE = 20_000


#: "What time …" asks a clock time, which a memory states in its words ("at 6:30") and the
#: search matches; `question_time` reads no period in such words, so favouring memories
#: that name a date would push the answer down (bench_updates: "What time do I wake up?").
_CLOCK = re.compile(r"\b(?:what|which) time\b", re.I)


def asks_date(query: str) -> bool:
    """A question asking when, for which a memory naming a date is the better answer."""
    return asks_when(query) and _CLOCK.search(query) is None


def boost_dated(scored: list[Recalled], factor: float, top: int) -> list[Recalled]:
    """For a question asking when: each of the `top` best candidates whose own words name a
    time, `factor` times (the rest cannot reach the result by this boost alone)."""
    if factor == 1.0:
        return scored
    best = {r.id for r in sorted(scored, key=lambda r: -r.weighted)[:top]}
    return [replace(r, weighted=r.weighted * factor) if r.id in best and _names_a_time(r.hit) else r
            for r in scored]


def _names_a_time(hit: SearchHit) -> bool:
    at = memory_time(hit.event_time, hit.created_at)
    key = (hit.id, hash(hit.content), at)
    if key in _NAMES_A_TIME:
        _NAMES_A_TIME.move_to_end(key)
        return _NAMES_A_TIME[key]
    named = at is not None and question_time(hit.content, at) is not None
    _NAMES_A_TIME[key] = named
    if len(_NAMES_A_TIME) > NAMES_A_TIME_CACHE:
        _NAMES_A_TIME.popitem(last=False)
    return named


def _holds(frame: TimeFrame, hit: SearchHit) -> bool:
    at = memory_time(hit.event_time, hit.created_at)
    return at is not None and frame.holds(at)


def missing(ids: Sequence[int], hits: Sequence[SearchHit]) -> list[int]:
    have = {h.id for h in hits}
    return [i for i in ids if i not in have]
