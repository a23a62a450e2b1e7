"""`python -m src.memory skills`: list, show, history, add, edit, remove, outcome, draft.

The same operations as the prompt's /skills and /skill (src/skills/commands.py),
against the database of runtime.yaml or DATABASE_URL. `draft FILE` is `/skill save`
for a transcript on disk: System 1 drafts the skill with structured output, and
without a language model it is refused with the same message as at the prompt.

`add_parser(sub)` registers the subcommand; `run(args, session)` runs it (see
src/memory/__init__.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from src.memory.session import Session
from src.skills import repository as repo
from src.skills.commands import (
    EMPTY_HINTS,
    escape_controls,
    find,
    format_list,
    format_skill,
    quoted,
)
from src.skills.drafting import draft, save_draft
from src.skills.labels import slugify
from src.skills.repository import SkillError

#: Every action of `skills`, in --help order (the top-level help names them all).
ACTIONS = ("list", "show", "history", "remove", "add", "edit", "outcome", "draft")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `skills` and its actions on an argparse subparsers object."""
    p = sub.add_parser("skills", help=f"the mind's skills (procedural memory): {', '.join(ACTIONS)}",
                       description="Skills: procedures the mind recalls on purpose with RECALL_SKILL.")
    actions = p.add_subparsers(dest="skills_action", metavar="ACTION", required=True)
    actions.add_parser("list", help="every skill with its counters (recalled/used/succeeded/failed)")
    for name, text in (("show", "one skill in full (a misspelt label finds the closest)"),
                       ("history", "the earlier versions of a skill"),
                       ("remove", "remove a skill (exact label; its versions are kept)")):
        actions.add_parser(name, help=text).add_argument("label")
    add = actions.add_parser("add", help="add a skill written by hand")
    add.add_argument("--label", help="snake_case label (default: from --name)")
    add.add_argument("--name", required=True)
    add.add_argument("--when", required=True, help="one sentence: when the skill applies")
    add.add_argument("--procedure-file", required=True, type=Path, help="text file with the numbered steps")
    edit = actions.add_parser("edit", help="change a skill; the previous version is kept")
    edit.add_argument("label")
    edit.add_argument("--name")
    edit.add_argument("--when")
    edit.add_argument("--procedure-file", type=Path)
    outcome = actions.add_parser("outcome", help="record that following a skill succeeded or failed")
    outcome.add_argument("label")
    outcome.add_argument("result", choices=("success", "failure"))
    drafting = actions.add_parser("draft", help="draft a skill from a transcript file with System 1")
    drafting.add_argument("transcript", type=Path)
    drafting.add_argument("--hint", default="")
    p.set_defaults(run=run)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SkillError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"{path}: cannot read it as UTF-8 text ({exc})") from exc


async def _act(args: argparse.Namespace, session: Session) -> str:
    pool, cutoff = session.pool, session.settings.skills.fuzzy_cutoff
    action = args.skills_action
    if action == "list":
        return format_list(await repo.list_all(pool), EMPTY_HINTS["cli"])
    if action == "show":
        skill, note = await find(pool, args.label, cutoff)
        if skill is None:
            raise SkillError(note)
        return format_skill(skill, note)
    if action == "history":
        skill, note = await find(pool, args.label, cutoff)
        if skill is None:
            raise SkillError(note)
        lines = [f"{skill.label}: version {skill.version} (current)"]
        for v in await repo.versions(pool, skill.label):
            lines += [f"--- version {v.version} (written {v.written_at:%Y-%m-%d %H:%M}, replaced "
                      f"{v.replaced_at:%Y-%m-%d %H:%M}) — {v.name}", f"when to use: {v.when_to_use}", v.procedure]
        return escape_controls("\n".join(lines))
    if action == "remove":
        if not await repo.remove(pool, args.label):
            raise SkillError(f"no skill called {quoted(args.label)}, so nothing was removed")
        return f"removed skill {quoted(args.label)} (its versions stay in skill_versions)"
    if action == "add":
        skill = await repo.create(pool, label=args.label or slugify(args.name), name=args.name,
                                  when_to_use=args.when, procedure=_read(args.procedure_file),
                                  provenance={"origin": "operator", "file": str(args.procedure_file)})
        return format_skill(skill, note=f"saved skill {quoted(skill.label)}:")
    if action == "edit":
        procedure = _read(args.procedure_file) if args.procedure_file else None
        skill = await repo.edit(pool, args.label, name=args.name, when_to_use=args.when, procedure=procedure,
                                provenance={"edited_by": "operator"})
        return f"{skill.label} is now version {skill.version} (version {skill.version - 1} kept)"
    if action == "outcome":
        counter = "succeeded" if args.result == "success" else "failed"
        value = await repo.bump(pool, args.label, counter)
        if value is None:
            raise SkillError(f"no skill called {quoted(args.label)}, so nothing was recorded")
        return f"{args.label}: {counter} is now {value}"
    # draft
    text = _read(args.transcript)
    if not text.strip():
        raise SkillError(f"{args.transcript}: the transcript is empty")
    s = session.settings.skills
    value = await draft(session.providers.system1,
                        "Here is a transcript of work done. Distil the procedure it worked out into a "
                        f"skill.\n\n{text[-s.draft_messages * s.draft_message_chars:]}",
                        purpose="skill_draft", hint=args.hint, max_tokens=s.draft_max_tokens)
    skill = await save_draft(pool, value, {"origin": "transcript", "file": str(args.transcript),
                                           "hint": args.hint or None})
    return format_skill(skill, note=f"saved skill {quoted(skill.label)}:")


async def run(args: argparse.Namespace, session: Session) -> int:
    """Run one `skills` action; 0 done, 1 refused (the reason on stderr)."""
    try:
        text = await _act(args, session)
    except SkillError as exc:
        session.err.write(f"skills {args.skills_action}: {escape_controls(str(exc))}\n")
        return 1
    session.out.write(text + "\n")
    return 0
