"""`RECALL_SKILL: <label>` — the model asks for a procedure by its label.

Resolution: the exact label; else the closest live label (difflib, `fuzzy_cutoff`),
returned with a warning naming both; else the list of labels so the model can ask
again. The `recommended` counter is credited to the *resolved* skill, not to what
the model typed — a precise, mechanical signal of which skills the mind reaches for.
When the answer that followed is delivered, `credit_use` adds one to `used`.

`SkillRecall` is what the loop holds: it builds the prompt section each cycle from the
skills near the focus (and so knows whether the verb is offered for it) and is the
protocol verb's handler.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from src.errors import ProviderError
from src.providers.protocols import Embedder
from src.recall.store import EMBEDDING_DIMENSIONS
from src.skills import repository as repo
from src.skills.labels import closest_label
from src.skills.prompt import one_line, skills_section
from src.skills.prompts import RECALL_SKILL_WHEN
from src.skills.settings import SkillsSettings
from src.text import cut
from src.tools.verbs import ToolVerb
from src.vectors import has_direction

log = logging.getLogger(__name__)

VERB = "RECALL_SKILL"
USAGE = "RECALL_SKILL: <label>"


@dataclass(frozen=True)
class Resolution:
    """How a requested label was resolved: `label` is None when nothing matched."""

    requested: str
    label: str | None
    fuzzy: bool
    known: tuple[str, ...]


async def resolve(db: repo.Executor, requested: str, *, cutoff: float) -> Resolution:
    """Exact label, else the closest live one (≥ cutoff), else None with the known labels."""
    known = await repo.labels(db)
    wanted = requested.strip()
    if wanted in known:
        return Resolution(requested, wanted, False, tuple(known))
    match = closest_label(wanted, known, cutoff=cutoff)
    return Resolution(requested, match, match is not None, tuple(known))


def format_procedure(skill: repo.Skill, max_chars: int) -> str:
    """The procedure as the model reads it (cut to `max_chars`)."""
    procedure = cut(skill.procedure, max_chars)
    return (f"Skill `{skill.label}` — {skill.name} (version {skill.version})\n"
            f"When to use: {one_line(skill.when_to_use, 300)}\n"
            f"Procedure (follow it as guidance for this answer):\n{procedure}")


async def recall_skill(db: repo.Executor, requested: str, settings: SkillsSettings,
                       *, now: datetime | None = None) -> tuple[str, str | None]:
    """The tool result for `RECALL_SKILL: requested`, and the label it was credited to.

    The result starts with "error:" only when no skill exists at all (nothing to retry).
    """
    resolution = await resolve(db, requested, cutoff=settings.fuzzy_cutoff)
    if resolution.label is None:
        if not resolution.known:
            return "error: no skills are saved yet; answer without one", None
        return (f"No skill is called {one_line(requested, 80)!r}. Known skills: {', '.join(resolution.known)}. "
                f"Reply `{VERB}: <label>` with one of them, or answer without a skill."), None
    skill = await repo.get(db, resolution.label)
    if skill is None:   # removed between the two reads
        return f"error: the skill {resolution.label!r} was just removed; answer without it", None
    await repo.bump(db, skill.label, "recommended", at=now or datetime.now(UTC))
    text = format_procedure(skill, settings.recall_max_chars)
    if resolution.fuzzy:
        # the model's words and the label stay out of the log's INFO and above (issue 39)
        log.warning("RECALL_SKILL of a label not held (%d characters) resolved to the closest one",
                    len(requested))
        log.debug("RECALL_SKILL %r resolved to %r", requested, skill.label)
        text = (f"warning: no skill is called {one_line(requested, 80)!r}; "
                f"using the closest, {skill.label!r}.\n{text}")
    return text, skill.label


def _usable(vec: np.ndarray | None) -> bool:
    """A focus vector the cosine can use: the column's width, finite, not all zeros."""
    return vec is not None and np.shape(vec) == (EMBEDDING_DIMENSIONS,) and has_direction(vec)


class SkillRecall:
    """The loop's side of skills: the prompt section and the RECALL_SKILL handler.

    Skills are offered only when they are near the focus (`section`), as the docs verb is
    offered only for questions about the mind's workings: a skills line in every prompt
    made a small model answer unrelated questions with RECALL_SKILL. `embedder` is the
    memories' (the focus vector is its); it embeds the cue of a skill saved or edited
    since, in one batch. Without one, skills are judged by full text only.
    """

    def __init__(self, db: repo.Executor, settings: SkillsSettings | None = None,
                 embedder: Embedder | None = None):
        self.db = db
        self.settings = settings or SkillsSettings()
        self.embedder = embedder
        self.offered_for: str | None = None   # the focus this cycle's section listed skills for
        self.recalled: list[str] = []         # labels resolved since the last credit_use

    async def section(self, focus: str, focus_vec: np.ndarray | None = None) -> str:
        """This cycle's "skills available" section: the skills near `focus` (the winner's text,
        `focus_vec` its embedding), "" when none is. It also decides whether the verb is
        offered for this focus."""
        self.offered_for = None
        if self.settings.prompt_max_tokens <= 0 or not focus.strip():
            return ""
        # more rows than could ever fit are pointless: a line is at least ~5 tokens
        limit = max(1, self.settings.prompt_max_tokens // 5)
        text = skills_section(await self.near(focus, focus_vec, limit), self.settings.prompt_max_tokens)
        self.offered_for = focus if text else None
        return text

    async def near(self, focus: str, focus_vec: np.ndarray | None, limit: int) -> list[repo.SkillSummary]:
        """The skills near `focus`, nearest first; cues without a vector of the embedder's
        model are embedded first (one call) and judged by their vectors."""
        model = self.embedder.model_name if self.embedder is not None else None
        vec = focus_vec if model is not None and _usable(focus_vec) else None
        floor = self.settings.near_floor(model)
        found, stale = await repo.near(self.db, focus, vec, model, floor, limit)
        if stale and model is not None and await self._embed_cues(model, stale):
            found, _ = await repo.near(self.db, focus, vec, model, floor, limit)
        return found

    async def _embed_cues(self, model: str, stale: list[repo.StaleCue]) -> bool:
        try:
            vectors = await self.embedder.embed([c.cue for c in stale], "RETRIEVAL_DOCUMENT")
        except ProviderError as exc:
            log.warning("could not embed %d skill cues (judged by full text this cycle): %s", len(stale), exc)
            return False
        return await repo.store_cues(self.db, model, stale, vectors) > 0

    def offered(self, focus: str) -> bool:
        """The verb is offered for the focus this cycle's section listed skills for."""
        return self.offered_for is not None and focus == self.offered_for

    def verb(self) -> ToolVerb:
        """`RECALL_SKILL: <label>` for the loop's tool protocol."""
        # reading a learned procedure changes only the mind's own counters
        return ToolVerb(verb=VERB, handler=self.handle, usage=USAGE, offered=self.offered, kind="internal",
                        when=RECALL_SKILL_WHEN)

    async def handle(self, argument: str) -> str:
        """The protocol handler: resolve, credit `recommended`, return the procedure."""
        text, label = await recall_skill(self.db, argument, self.settings)
        if label is not None:
            self.recalled.append(label)
        return text

    async def credit_use(self, delivered: bool) -> list[str]:
        """After the cycle: the recalled skills' `used` counter when the answer was delivered."""
        labels, self.recalled = self.recalled, []
        if not delivered:
            return []
        for label in dict.fromkeys(labels):
            await repo.bump(self.db, label, "used")
        return labels
