"""The `skills` and `skill_versions` tables: every SQL statement about skills.

Saving never overwrites: a new skill gets a fresh label (`make_unique_label`); an
edit copies the current row into `skill_versions` and bumps `version` in one
statement; removal is soft. Counters are atomic increments (`used = used + 1`),
never read-modify-write, so the loop and the CLI can bump them concurrently.

Which skills are near a focus (`near`) is one statement over every live skill: the
cosine of the focus vector to each skill's cue vector (sql/162), kept at or above a
floor; a skill whose cue has no vector of the current model, or a focus without a
vector, is judged by full text on its label and name instead. The cue vectors are
written by `store_cues` and dropped by a trigger whenever the cue's text changes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import asyncpg
import numpy as np
from pgvector import HalfVector

from src.db.sql import Executor
from src.recall.search import QUESTION_TSQUERY
from src.skills.labels import LABEL_PATTERN, make_unique_label

Counter = Literal["recommended", "used", "succeeded", "failed"]
COUNTERS: tuple[Counter, ...] = ("recommended", "used", "succeeded", "failed")


class SkillError(ValueError):
    """A skill request that cannot be carried out; the message says why and what to do."""


@dataclass(frozen=True)
class SkillSummary:
    """What the prompt section needs: no procedure."""

    label: str
    name: str
    when_to_use: str
    uses: int
    total: int = 0          # live skills in all (the listing may be cut by a limit)
    similarity: float | None = None     # to the focus (`near`); None when judged by full text


@dataclass(frozen=True)
class StaleCue:
    """A skill whose cue has no vector of the current embed model: its text to embed."""

    id: int
    cue: str
    digest: str             # md5 of `cue`: the vector is stored only while the text is the same


@dataclass(frozen=True)
class Skill:
    id: int
    label: str
    name: str
    when_to_use: str
    procedure: str
    provenance: dict[str, Any]
    version: int
    recommended: int
    used: int
    succeeded: int
    failed: int
    created_at: datetime
    updated_at: datetime
    last_recalled_at: datetime | None


@dataclass(frozen=True)
class SkillVersion:
    version: int
    name: str
    when_to_use: str
    procedure: str
    written_at: datetime
    replaced_at: datetime


_COLUMNS = ("id, label, name, when_to_use, procedure, provenance, version, recommended, used, "
            "succeeded, failed, created_at, updated_at, last_recalled_at")


def _skill(row: asyncpg.Record) -> Skill:
    values = dict(row)
    values["provenance"] = json.loads(values["provenance"])
    return Skill(**values)


def _check_fields(label: str, name: str, when_to_use: str, procedure: str) -> None:
    if not LABEL_PATTERN.match(label):
        raise SkillError(f"label {label!r} is not snake_case (a letter, then letters, digits or '_', "
                         "at most 64 characters)")
    for field_name, value in (("name", name), ("when_to_use", when_to_use), ("procedure", procedure)):
        if not value.strip():
            raise SkillError(f"a skill needs a non-empty {field_name}")


async def labels(db: Executor) -> list[str]:
    """Every live label, sorted."""
    return [r["label"] for r in await db.fetch(
        "SELECT label FROM skills WHERE removed_at IS NULL ORDER BY label")]


async def create(db: Executor, *, label: str, name: str, when_to_use: str, procedure: str,
                 provenance: Mapping[str, Any] | None = None) -> Skill:
    """Save a new skill under `label`, or `label_2`, `label_3`… when it is taken."""
    _check_fields(label, name, when_to_use, procedure)
    prov = json.dumps(dict(provenance or {}), ensure_ascii=False, default=str)
    for _ in range(5):   # a concurrent save may take the same free label; try the next one
        unique = make_unique_label(label, await labels(db))
        try:
            async with _savepoint(db):
                row = await db.fetchrow(
                    f"""INSERT INTO skills (label, name, when_to_use, procedure, provenance)
                        VALUES ($1, $2, $3, $4, $5::jsonb) RETURNING {_COLUMNS}""",
                    unique, name.strip(), when_to_use.strip(), procedure.strip(), prov)
        except asyncpg.UniqueViolationError:
            continue
        return _skill(row)
    raise SkillError(f"could not find a free label near {label!r}; choose another")


@asynccontextmanager
async def _savepoint(db: Executor) -> AsyncIterator[None]:
    """A savepoint on a connection inside a transaction (an approval's, which saves the skill
    and marks the approval decided together): a taken label must not abort that
    transaction, only this insert. On a pool each statement is its own transaction."""
    if isinstance(db, asyncpg.Connection) and db.is_in_transaction():
        async with db.transaction():
            yield
    else:
        yield


async def get(db: Executor, label: str) -> Skill | None:
    """The live skill called `label`, or None."""
    row = await db.fetchrow(f"SELECT {_COLUMNS} FROM skills WHERE label = $1 AND removed_at IS NULL", label)
    return _skill(row) if row else None


async def list_all(db: Executor) -> list[Skill]:
    """Every live skill, most used first."""
    rows = await db.fetch(f"""SELECT {_COLUMNS} FROM skills WHERE removed_at IS NULL
                               ORDER BY recommended + used DESC, label""")
    return [_skill(r) for r in rows]


_EDIT = f"""
WITH current AS (
    SELECT id, version, name, when_to_use, procedure, provenance, updated_at
      FROM skills WHERE label = $1 AND removed_at IS NULL FOR UPDATE
), kept AS (
    INSERT INTO skill_versions (skill_id, version, name, when_to_use, procedure, provenance, written_at)
    SELECT id, version, name, when_to_use, procedure, provenance, updated_at FROM current
)
UPDATE skills s
   SET name = COALESCE($2, s.name), when_to_use = COALESCE($3, s.when_to_use),
       procedure = COALESCE($4, s.procedure),
       provenance = s.provenance || COALESCE($5::jsonb, '{{}}'::jsonb),
       version = s.version + 1, updated_at = now()
  FROM current WHERE s.id = current.id
RETURNING {', '.join('s.' + c.strip() for c in _COLUMNS.split(','))}
"""


async def edit(db: Executor, label: str, *, name: str | None = None, when_to_use: str | None = None,
               procedure: str | None = None, provenance: Mapping[str, Any] | None = None) -> Skill:
    """Change fields of `label`; the previous version is kept in skill_versions."""
    for field_name, value in (("name", name), ("when_to_use", when_to_use), ("procedure", procedure)):
        if value is not None and not value.strip():
            raise SkillError(f"a skill needs a non-empty {field_name}")
    if name is None and when_to_use is None and procedure is None:
        raise SkillError("nothing to change: give a new name, when_to_use or procedure")
    row = await db.fetchrow(
        _EDIT, label, name and name.strip(), when_to_use and when_to_use.strip(),
        procedure and procedure.strip(),
        json.dumps(dict(provenance), ensure_ascii=False, default=str) if provenance else None)
    if row is None:
        raise SkillError(f"no skill called {label!r}")
    return _skill(row)


async def versions(db: Executor, label: str) -> list[SkillVersion]:
    """The previous versions of the live skill `label`, oldest first."""
    rows = await db.fetch(
        """SELECT v.version, v.name, v.when_to_use, v.procedure, v.written_at, v.replaced_at
             FROM skill_versions v JOIN skills s ON s.id = v.skill_id
            WHERE s.label = $1 AND s.removed_at IS NULL ORDER BY v.version""", label)
    return [SkillVersion(**dict(r)) for r in rows]


async def remove(db: Executor, label: str) -> bool:
    """Soft-remove the live skill `label`; False when there is none."""
    status = await db.execute(
        "UPDATE skills SET removed_at = now() WHERE label = $1 AND removed_at IS NULL", label)
    return status.endswith(" 1")


_BUMP = {c: f"""UPDATE skills SET {c} = {c} + 1{', last_recalled_at = COALESCE($2::timestamptz, now())' if c == 'recommended' else ''}
                 WHERE label = $1 AND removed_at IS NULL RETURNING {c}""" for c in COUNTERS}


async def bump(db: Executor, label: str, counter: Counter, *, at: datetime | None = None) -> int | None:
    """Add one to `counter` of `label`; the new value, or None when there is no such skill."""
    if counter not in _BUMP:
        raise SkillError(f"unknown counter {counter!r}; one of {', '.join(COUNTERS)}")
    if counter == "recommended":
        return await db.fetchval(_BUMP[counter], label, at)
    return await db.fetchval(_BUMP[counter], label)


#: A skill's cue, what its vector is made from: the label in words, the name, when to use
#: it and the start of the procedure (whose steps name what the task is about: "steep",
#: "puncture"). One SQL expression, so the text embedded and the text checked when its
#: vector is stored are the same. A sentence model reads about the first 1,000 characters.
CUE = "replace(label, '_', ' ') || '. ' || name || '. ' || when_to_use || E'\\n' || left(procedure, 1000)"

_NEAR = r"""
WITH question AS (
    SELECT """ + QUESTION_TSQUERY + r""" AS tsq
),
live AS (
    SELECT id, label, name, when_to_use, recommended + used AS uses, updated_at,
           """ + CUE + r""" AS cue,
           $3::text IS NOT NULL AND (cue_embedding IS NULL OR cue_embed_model IS DISTINCT FROM $3::text)
               AS stale,
           CASE WHEN $2::halfvec IS NOT NULL AND cue_embed_model = $3::text
                THEN 1 - (cue_embedding <=> $2::halfvec) END AS similarity
      FROM skills
     WHERE removed_at IS NULL
),
judged AS (
    SELECT *, COALESCE(CASE WHEN similarity IS NOT NULL THEN similarity >= $4::float8
                            ELSE to_tsvector('english', replace(label, '_', ' ') || ' ' || name)
                                 @@ (SELECT tsq FROM question) END, false) AS near
      FROM live
)
SELECT id, label, name, when_to_use, uses, similarity, near, stale, cue, md5(cue) AS digest,
       count(*) FILTER (WHERE near) OVER () AS total
  FROM judged
 WHERE near OR stale
 ORDER BY near DESC, similarity DESC NULLS LAST, uses DESC, updated_at DESC, label
 LIMIT $5::int
"""


async def near(db: Executor, focus: str, focus_vec: np.ndarray | None, embed_model: str | None,
               floor: float, limit: int) -> tuple[list[SkillSummary], list[StaleCue]]:
    """The live skills near `focus`, nearest first, and the skills whose cue needs a vector of
    `embed_model` (whether near by full text or not; none without a model).

    Near: cosine of `focus_vec` to the cue vector at least `floor`; by full text (a word of
    the focus in the label or name) when there is no focus vector or the cue has no vector
    of `embed_model`. `limit` bounds the rows returned of both kinds together.
    """
    query = HalfVector(np.asarray(focus_vec, dtype=np.float32)) if focus_vec is not None else None
    rows = await db.fetch(_NEAR, focus, query, embed_model, floor, limit)
    found = [SkillSummary(r["label"], r["name"], r["when_to_use"], r["uses"], r["total"], r["similarity"])
             for r in rows if r["near"]]
    stale = [StaleCue(r["id"], r["cue"], r["digest"]) for r in rows if r["stale"]]
    return found, stale


_STORE_CUES = """
UPDATE skills SET cue_embedding = u.vec, cue_embed_model = $1::text
  FROM unnest($2::bigint[], $3::halfvec[], $4::text[]) AS u(id, vec, digest)
 WHERE skills.id = u.id AND removed_at IS NULL AND md5(""" + CUE + """) = u.digest
"""


async def store_cues(db: Executor, embed_model: str, cues: list[StaleCue], vectors: np.ndarray) -> int:
    """Store the cue vectors of `embed_model` (rows of `vectors`, in the order of `cues`); a
    skill whose cue changed since it was read keeps none. How many were stored."""
    status = await db.execute(_STORE_CUES, embed_model, [c.id for c in cues],
                              [HalfVector(np.asarray(v, dtype=np.float32)) for v in vectors],
                              [c.digest for c in cues])
    return int(status.split()[-1])
