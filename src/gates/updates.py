"""Does a newer statement of the user update an older one? (issue 37 item 3)

A person's facts change: they move, change jobs, reschedule. When the user states something
that replaces what they said before about the same subject, the older statement is kept —
it was true then, and a question about the past needs it — and linked as superseded by the
newer (`memory_supersedes` via 'update', sql/153); recall ranks the newer first and the
model's context shows the older marked as earlier (src/recall/current.py). The plan's
principle stands: a contradiction is detected, not resolved; an update is no contradiction
(both were true, at different times), so the gate contradicts no weight for it.

Who: only the user's own statements, against the user's own older statements (the same
speaker; src/recall/speakers.py). Other people's imported chat and the mind's own lines are
never linked.

Offline (`judge`): the same subject and a change cue, with nothing saying "as well".
- The same subject: the two statements' vectors are close (`UpdateThresholds.similarity`),
  or a little less close while sharing a content word ("landlord", "insurance").
- A change cue in the newer: a word or phrase that says something replaced what was
  (`CHANGE_WORDS`, `CHANGE_PHRASES`: "moved", "switched", "quit", "rescheduled", "no
  longer", "from now on", "these days"). "now"/"new"/"these days" are weaker: they also
  close statements that add to the older ("Dad spends most days fishing now" after "My dad
  retired last year"), so they need the closer `weak_similarity`.
- Nothing adds rather than replaces: "also", "other", "too", "another", "as well", "both"
  ("I also take a statin", "My other brother Dev").
- Either claims a whole life ("never", "always", "ever"): a later change cannot update
  "I've never smoked", nor "I've never been married" an earlier "married to Marta" — such a
  pair is a contradiction, left to the contradiction layers.
Without a cue the pair is undecided. With a model, the gate's layer 3 asks the relation
question (update / contradiction / neither) about the cues' pick and the closest earlier
statements, and its answer decides (src/gates/model_questions.py: most changes are told
without a verb of change, and only a model knows that a Kia replaces a Ford Focus). Offline
(reflex mode, or runtime.local.yaml's small model) an undecided pair is not linked (a
distinct fact marked superseded would hide a true one: the costlier error).

One link per newer statement, to the closest older statement judged an update that is not
superseded already (a chain Porto → Lisbon → Madrid links each step to the one before).
Measured on bench/data/updates.jsonl (notes.md, `python -m bench updates`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

import asyncpg
import numpy as np

from src.db.sql import Executor
from src.gates.evaluation import Evaluation, Neighbour
from src.gates.matrix import PERSISTING
from src.gates.scratch import BufferedItem
from src.gates.utterance import classify
from src.recall.search import USER_STATED
from src.recall.speakers import speaker_of

#: Verbs that say something replaced what was (`_inflected` adds their regular forms): a
#: change is told with one of them far more often than not.
CHANGE_VERBS = ("move", "switch", "change", "quit", "reschedule", "rebook", "rename", "replace",
                "upgrade", "downgrade", "promote", "stop", "raise", "decide", "discharge", "update",
                "engage", "divorce", "separate", "postpone", "cancel", "retire", "transfer", "relocate",
                "swap", "trade", "ditch", "drop", "join", "convert", "resign", "graduate", "hire",
                "fire", "finish", "sack", "reduce", "increase", "lower",
                "shift")
#: Irregular change verbs, every form.
_IRREGULAR = frozenset({"leave", "leaves", "leaving", "left", "sell", "sells", "selling", "sold",
                        "become", "becomes", "became", "becoming", "lose", "loses", "lost", "losing",
                        "quitting", "upped", "dropped", "swapped", "stopped", "shifted"})
#: Verbs too common alone: a change only with the particle that makes it one, every form.
_WITH_PARTICLE = {
    ("push", "pushed", "pushing"): ("back",),
    ("bring", "brought", "bringing"): ("forward",),
    ("pick", "picked", "picking"): ("up",),
    ("take", "took", "taken", "taking"): ("up", "over"),
    ("give", "gave", "given", "giving"): ("up",),
    ("go", "went", "gone", "going"): ("back", "vegan", "vegetarian", "part-time", "full-time", "freelance"),
    ("turn", "turned", "turning"): ("down",),
    ("cut", "cutting"): ("down", "back"),
    ("gone", "went"): ("with", "to"),
}
#: Words, not verbs, that say something replaced what was.
CHANGE_WORDS = frozenset({"anymore", "instead", "actually", "nowadays", "extension", "handed", "ex",
                          "formerly", "previously", "newly"})
#: Multi-word change cues (matched on the lowercased words joined by single spaces).
CHANGE_PHRASES = ("no longer", "any more", "from now on", "down to", "up to", "split up",
                  "broke up", "from next", "from monday", "not any", "not anymore", "as of",
                  "starting from", "no more")


def _inflected(verbs: tuple[str, ...]) -> frozenset[str]:
    """Every regular form of `verbs` ("move": moves, moved, moving; "stop": stopped is irregular)."""
    out: set[str] = set()
    for v in verbs:
        if v.endswith("e"):
            out |= {v, v + "s", v + "d", v[:-1] + "ing"}
        elif v.endswith("y"):
            out |= {v, v + "s", v[:-1] + "ied", v + "ing"}
        else:
            out |= {v, v + "s", v + "es", v + "ed", v + "ing"}
    return frozenset(out) | _IRREGULAR


_CHANGE_FORMS = _inflected(CHANGE_VERBS)
#: Cues that also close statements which add to the older one: need a closer subject.
#: An event told of the same subject (a past-tense or perfect verb) is no cue: "Watched
#: Paddington 2 again last night" after "My favourite film is Paddington 2", "Someone tried
#: to break into the shed" after "My shed's full of woodworking tools" (notes.md).
WEAK_CUES = frozenset({"now", "new", "these days", "just", "finally", "recently", "since",
                       "currently", "today", "yesterday", "got"})
#: Words that add a fact beside the older one instead of replacing it.
ALSO_WORDS = frozenset({"also", "other", "too", "another", "both", "as well"})
#: An older statement about a whole life cannot be updated, only contradicted.
LIFETIME_WORDS = frozenset({"never", "always", "ever"})
_STOP = frozenset("""a an the to of and or in on at for with it that this my i i'm i've i'd
    we we're our is was be are am me his her he she they their them from now new got get
    has have had do does did just so but not no yes its it's there here about""".split())
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

Relation = Literal["update", "undecided", "not_update"]


@dataclass(frozen=True)
class UpdateThresholds:
    """How close two statements must be to share a subject (cosine of the stored vectors)."""

    similarity: float = 0.6          # with a strong change cue and no subject word in common
    shared_word_similarity: float = 0.35   # with a strong cue and a content word in common
    weak_similarity: float = 0.65    # with only a weak cue ("now", "these days", "just")
    floor: float = 0.35              # candidates below this are not read at all
    candidates: int = 5              # nearest older statements judged per new statement
    newest: int = 2000               # the user's newest statements compared exactly


@dataclass(frozen=True)
class UpdateCall:
    relation: Relation
    reason: str
    by_form: bool = False     # ruled out by the statements' form ("also", "never"): no model is asked


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("\u2019", "'"))


def change_cues(text: str) -> tuple[set[str], set[str]]:
    """(strong, weak) change cues of a statement."""
    words = _words(text)
    joined = " " + " ".join(words) + " "
    strong = {w for w in words if w in CHANGE_WORDS or w in _CHANGE_FORMS}
    strong |= {p for p in CHANGE_PHRASES if f" {p} " in joined}
    strong |= {f"{w} {p}" for forms, particles in _WITH_PARTICLE.items() for w in forms for p in particles
               if f" {w} {p} " in joined}
    weak = {w for w in words if w in WEAK_CUES} | ({"these days"} if " these days " in joined else set())
    return strong, weak


def _content(text: str) -> set[str]:
    """Content words, a possessive's "'s" dropped ("Grandad's" is about grandad)."""
    return {w.removesuffix("'s") for w in _words(text) if w not in _STOP and len(w) > 2}


#: Words that tell a change or a time, not what the statement is about.
_NOT_SUBJECT = frozenset({"last", "next", "month", "months", "week", "weeks", "year", "years", "day",
                          "days", "ago", "today", "yesterday", "tomorrow", "morning", "evening", "night",
                          "weekend", "since", "update", "updated", "just", "finally", "recently"})


def _subject(text: str) -> set[str]:
    """The content words that say what a statement is about: its change cues and time words
    left out ("moved … last month" shares nothing with "Maren moved … last month")."""
    return {w for w in _content(text) if w not in _NOT_SUBJECT and w not in _CHANGE_FORMS
            and w not in CHANGE_WORDS and w not in WEAK_CUES}


def judge(older: str, newer: str, similarity: float, th: UpdateThresholds) -> UpdateCall:
    """Offline: is `newer` an update of `older` (their stored vectors `similarity` apart)?"""
    words = _words(newer)
    joined = " " + " ".join(words) + " "
    also = {w for w in words if w in ALSO_WORDS} | ({"as well"} if " as well " in joined else set())
    if also:
        return UpdateCall("not_update", f"adds rather than replaces ({', '.join(sorted(also))})", by_form=True)
    lifetime = {w for w in _words(older) + words if w in LIFETIME_WORDS}
    if lifetime:
        return UpdateCall("not_update", f"one of the two speaks of a whole life ({', '.join(sorted(lifetime))})",
                          by_form=True)
    # a cue the older statement says too is no change: the same thing said again
    strong, weak = (a - b for a, b in zip(change_cues(newer), change_cues(older), strict=True))
    shared = _subject(older) & _subject(newer)
    if strong:
        need = th.shared_word_similarity if shared else th.similarity
        if similarity >= need:
            return UpdateCall("update", f"change cue ({', '.join(sorted(strong))}), similarity "
                                        f"{similarity:.2f} >= {need:.2f}")
        return UpdateCall("not_update", f"change cue but another subject (similarity {similarity:.2f} < {need:.2f})")
    if weak:
        if similarity >= th.weak_similarity:
            return UpdateCall("update", f"change cue ({', '.join(sorted(weak))}), similarity "
                                        f"{similarity:.2f} >= {th.weak_similarity:.2f}")
        return UpdateCall("not_update", f"weak change cue, similarity {similarity:.2f} < {th.weak_similarity:.2f}")
    return UpdateCall("undecided", "the same speaker, no change cue")


@dataclass(frozen=True)
class Earlier:
    """One of the user's older statements close to a new one."""

    memory_id: int | None             # a stored memory, or None for an earlier item of the chunk
    content: str
    similarity: float
    batch_index: int | None = None
    at: datetime | None = None        # when it was said (its event time, else when stored)


CANDIDATES_SQL = """
WITH item AS (SELECT ord, v::halfvec AS vec FROM unnest($1::text[]) WITH ORDINALITY AS t(v, ord))
SELECT i.ord, o.id, o.content, o.sim, o.at
  FROM item i
 CROSS JOIN LATERAL (
     SELECT r.id, r.content, 1 - (r.embedding <=> i.vec) AS sim, r.at
       FROM (SELECT m.id, m.content, m.embedding, COALESCE(m.event_time, m.created_at) AS at FROM memories m
              WHERE m.embed_model = $2::text AND m.embedding IS NOT NULL AND """ + USER_STATED.replace(
    "metadata", "m.metadata").replace("source_tag", "m.source_tag") + """
                AND NOT EXISTS (SELECT 1 FROM memory_supersedes s WHERE s.source_id = m.id AND s.via IN ('update', 'correction'))
              ORDER BY m.id DESC LIMIT $3::int) r
      ORDER BY r.embedding <=> i.vec, r.id
      LIMIT $4::int) o
 WHERE o.sim >= $5::float8
 ORDER BY i.ord, o.sim DESC
"""


async def earlier_statements(db: Executor, vecs: Sequence[np.ndarray], embed_model: str,
                             th: UpdateThresholds) -> list[list[Earlier]]:
    """For each vector, the user's nearest older statements not yet superseded (one query).

    The newest `th.newest` of the user's statements are compared exactly: an update is said
    about what the user said before, and the HNSW index can miss rows stored after it was
    built (src/recall/search.py); a fact last mentioned more than `newest` statements ago is
    not linked."""
    out: list[list[Earlier]] = [[] for _ in vecs]
    if not len(vecs):
        return out
    literals = ["[" + ",".join(f"{x:.6g}" for x in np.asarray(v, dtype=np.float32)) + "]" for v in vecs]
    rows: list[asyncpg.Record] = await db.fetch(CANDIDATES_SQL, literals, embed_model, th.newest,
                                                th.candidates, th.floor)
    for r in rows:
        out[r["ord"] - 1].append(Earlier(r["id"], r["content"], float(r["sim"]), at=r["at"]))
    return out


def pick(newer: str, earlier: Sequence[Earlier], th: UpdateThresholds) -> tuple[Earlier, UpdateCall] | None:
    """The earlier statement `newer` updates offline, or None: of those judged updated, the one
    sharing the most content words with it, then the closest ("I moved from Leeds to Bristol"
    updates "I live in Leeds", not the closer "I work as a nurse")."""
    return _best([(e, judge(e.content, newer, e.similarity, th)) for e in earlier], newer)


def pick_later(older: str, later: Sequence[Earlier], th: UpdateThresholds) -> tuple[Earlier, UpdateCall] | None:
    """The statement said after `older` that updates it offline, or None (a line judged after
    one said later: the newer was stored first, its older kept buffered meanwhile)."""
    return _best([(e, judge(older, e.content, e.similarity, th)) for e in later], older)


def _best(judged: Sequence[tuple[Earlier, UpdateCall]], text: str) -> tuple[Earlier, UpdateCall] | None:
    words = _subject(text)
    updated = [(e, call) for e, call in judged if call.relation == "update"]
    if not updated:
        return None
    return max(updated, key=lambda ec: (len(_subject(ec[0].content) & words), ec[0].similarity))


async def link(conn: asyncpg.Connection, pairs: Sequence[tuple[int, int]]) -> int:
    """Write (newer, older) update links; an existing link or a self-link is skipped."""
    pairs = [(n, o) for n, o in pairs if n != o]
    if not pairs:
        return 0
    result = await conn.execute(
        """INSERT INTO memory_supersedes (insight_id, source_id, via)
           SELECT n, o, 'update' FROM unnest($1::bigint[], $2::bigint[]) AS t(n, o)
           ON CONFLICT (insight_id, source_id) DO NOTHING""",
        [n for n, _ in pairs], [o for _, o in pairs])
    return int(result.split()[-1])


# --- at the exit gate (src/gates/exit.py) ------------------------------------------------------

#: What the gate reads as one statement updating another.
GATE = UpdateThresholds()


def user_statement(item: BufferedItem, statement_sources: Sequence[str]) -> bool:
    """Whether `item` is a statement the user made (only these update the user's facts)."""
    who = speaker_of(item.source_tag, item.metadata)
    return (who is not None and who.kind == "user" and item.source_tag in statement_sources
            and classify(item.content).kind == "statement")


async def earlier_for(db: Executor, items: Sequence[BufferedItem], vecs: np.ndarray,
                      statement_sources: Sequence[str], embed_model: str, most: int = 0,
                      floor: float = GATE.floor) -> tuple[list[int], dict[int, list[Earlier]]]:
    """The chunk's user statements (indices) and, for each, the user's older stored statements:
    the nearest `GATE.candidates` at least `GATE.floor` alike that the cues judge, and as many
    as a model is asked about (`most`, at least `floor` alike: src/gates/model_questions.py)."""
    statements = [j for j, i in enumerate(items) if user_statement(i, statement_sources)]
    th = replace(GATE, candidates=max(GATE.candidates, most), floor=min(GATE.floor, floor))
    found = await earlier_statements(db, [vecs[j] for j in statements], embed_model, th)
    return statements, dict(zip(statements, found, strict=True))


def note(e: Evaluation, stored: Sequence[Earlier], in_chunk: Sequence[Earlier]) -> None:
    """What `e` (a user's statement) updates, and what updates it: the user's other statements,
    stored or in its chunk, each said before or after it. The older one it updates offline is
    marked (`update_of`), and the later one that updates it (`updated_by`): a line can be judged
    after a later one was stored (kept in the buffer a round longer)."""
    said = e.item.created_at
    judged = [x for x in stored[: GATE.candidates] if x.similarity >= GATE.floor]     # closest first
    near = [*judged, *(x for x in in_chunk if x.similarity >= GATE.floor)]
    before = [x for x in near if x.at is None or x.at <= said]
    after = [x for x in near if x.at is not None and x.at > said]
    asked = [x for x in stored if x.at is None or x.at <= said]     # a model may be asked of more
    e.earlier = sorted((_neighbour(x) for x in _distinct([*before, *asked])), key=lambda n: -n.similarity)
    picked = pick(e.item.content, before, GATE)
    if picked is not None:
        older, call = picked
        e.update_offline = (_neighbour(older), call.reason)
    later = pick_later(e.item.content, after, GATE)
    if later is not None:
        e.updated_by = _neighbour(later[0])


def _distinct(xs: Sequence[Earlier]) -> list[Earlier]:
    """Each statement once, the first time it comes."""
    out: dict[tuple[int | None, int | None], Earlier] = {}
    for x in xs:
        out.setdefault((x.memory_id, x.batch_index), x)
    return list(out.values())


def _neighbour(x: Earlier) -> Neighbour:
    return Neighbour(x.similarity, x.content, memory_id=x.memory_id, batch_index=x.batch_index)


def said_beside(items: Sequence[BufferedItem], vecs: np.ndarray, statements: Sequence[int],
                j: int) -> list[Earlier]:
    """The user's other statements of the chunk, with their cosine to item `j` and when said
    (in chunk order when said at the same moment)."""
    unit = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    said = items[j].created_at
    return [Earlier(None, items[i].content, float(unit[j] @ unit[i]), i,
                    items[i].created_at if items[i].created_at != said
                    else said + (timedelta(microseconds=-1) if i < j else timedelta(microseconds=1)))
            for i in statements if i != j]


def pairs(mine: Sequence[Evaluation], resolve) -> list[tuple[int, int]]:
    """The (newer, older) links a written chunk makes: persisted items only."""
    out = []
    for e in mine:
        if e.memory_id is None or e.cell.action not in PERSISTING:
            continue
        if e.update_of is not None and (older := resolve(e.update_of)) is not None:
            out.append((e.memory_id, older))
        if e.updated_by is not None and (newer := resolve(e.updated_by)) is not None:
            out.append((newer, e.memory_id))
    return out


def same(n: Neighbour, among: Sequence[Neighbour]) -> bool:
    return any((n.memory_id, n.batch_index) == (m.memory_id, m.batch_index) for m in among)


def mark(e: Evaluation, older: Neighbour, reason: str) -> None:
    """`e` updates `older`: a contradiction verdict on that pair stands down (a change is no
    contradiction: both were true, at their times)."""
    e.update_of, e.update_reason = older, reason
    e.verdicts = [(n, replace(v, contradicts=False, layer=f"{v.layer}+update") if v.contradicts else v)
                  if same(n, [older]) else (n, v) for n, v in e.verdicts]
