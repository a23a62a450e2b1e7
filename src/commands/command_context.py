"""What a slash command is handed: the running process's parts, fixed when the registry is built."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from src.config import Settings
from src.consolidation.service import Consolidation
from src.db.database import Database
from src.dmn.generator import DmnGenerator
from src.erasure.question import ForgetQuestion
from src.gates.memory_gate import Gates
from src.loop.cognitive_loop import CognitiveLoop
from src.providers.budget import BackgroundBudget
from src.providers.factory import Providers
from src.recall.retrieval import Retriever
from src.weights.safety import Safety


class RunningMind(Protocol):
    """What the commands read from src.mind.Mind (named structurally: nothing but the process
    imports the wiring)."""

    safety: Safety
    retriever: Retriever
    gates: Gates
    loop: CognitiveLoop
    consolidation: Consolidation | None
    dmn: DmnGenerator | None
    budget: BackgroundBudget | None


@dataclass(frozen=True)
class CommandContext:
    """Everything a command may use. `mind` is None when no mind runs (a test of /help or /good
    builds the registry without one). `say` prints a line later, when work a command started
    in the background is done; `quitting` is the process's event that /quit sets (answer
    what was said, then stop)."""

    settings: Settings
    db: Database
    providers: Providers
    session_id: str
    say: Callable[[str], None]
    quitting: asyncio.Event
    mind: RunningMind | None = None
    erasure: ForgetQuestion | None = None      # /forget and /correct, and the question they open
