"""What the loop is built from: the running parts of one mind, wired in src/mind.py.

`CognitiveLoop(parts, settings, ...)` takes these plus the settings sections it reads
(`LoopSections`: src/mind.py passes the composed `Settings`, which has them all); a new
part (a DMN generator, the gut) is a new field here, not a new constructor argument.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import asyncpg
import numpy as np

from src.context.assembly import ContextAssembler
from src.context.settings import ContextSettings
from src.gates.memory_gate import Gates
from src.loop.attention_queue import AttentionQueue
from src.loop.settings import LoopSettings
from src.metacognition.settings import MetacognitionSettings
from src.metacognition.threshold import EscalationThreshold
from src.recall.layers import LayerEmbeddings
from src.recall.retrieval import Retriever
from src.recall.store import MemoryStore
from src.skills.recall_skill import SkillRecall
from src.tools.read_docs import DocsTool

if TYPE_CHECKING:   # typing only: the factory pulls in every SDK
    from src.db.manifest import Manifest
    from src.loop.inner_life import InnerLife, Submit
    from src.providers.factory import Providers


class Named(Protocol):
    @property
    def name(self) -> str: ...


class LoopSections(Protocol):
    """The settings sections the loop reads. A protocol, so the loop never imports the
    wiring (src/config.py composes `Settings`, which satisfies it)."""

    @property
    def agent(self) -> Named: ...
    @property
    def loop(self) -> LoopSettings: ...
    @property
    def context(self) -> ContextSettings: ...
    @property
    def metacognition(self) -> MetacognitionSettings: ...


@dataclass
class LoopParts:
    """The mind's parts the loop drives; each is shared with the rest of the mind."""

    pool: asyncpg.Pool
    providers: Providers
    store: MemoryStore
    retriever: Retriever
    gates: Gates
    assembler: ContextAssembler
    threshold: EscalationThreshold
    attention: AttentionQueue
    layers: LayerEmbeddings | None = None      # re-read every cycle when set
    docs: DocsTool | None = None
    manifest: Manifest | None = None
    goal_vecs: Sequence[np.ndarray] = field(default_factory=list)
    inner: InnerLife | None = None             # gut, outcomes, readiness (src/loop/inner_life.py)
    # what the inner life's impulses (gut signals, goal reflections) pass before they enter:
    # the background budget's gate (src/providers/budget.py); None: they enter as they come
    impulse_gate: Callable[[Submit], Submit] | None = None
    skills: SkillRecall | None = None           # the skills section and RECALL_SKILL
