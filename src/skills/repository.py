"""The `skills` and `skill_versions` tables: every SQL statement about skills.

Saving never overwrites: a new skill gets a fresh label (`make_unique_label`); an
edit copies the current row into `skill_versions` and bumps `version` in one
statement; removal is soft. Counters are atomic increments (`used = used + 1`),
never read-modify-write, so the loop and the CLI can bump them concurrently.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import asyncpg

from src.db.sql import Executor
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


async def summaries(db: Executor, limit: int | None = None) -> list[SkillSummary]:
    """label, name, when_to_use of live skills, most used first (recalled + used), then newest."""
    rows = await db.fetch(
        """SELECT label, name, when_to_use, recommended + used AS uses, count(*) OVER () AS total
             FROM skills
            WHERE removed_at IS NULL
            ORDER BY recommended + used DESC, updated_at DESC, label
            LIMIT $1""", limit)
    return [SkillSummary(r["label"], r["name"], r["when_to_use"], r["uses"], r["total"]) for r in rows]


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
