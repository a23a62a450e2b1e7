"""What one cycle leaves for the next (plan §3.2, §3.3), in one typed place.

The steps of a cycle are separate parts (src/loop/cognitive_loop.py); the few things
they hand on to later cycles live here, so no step reaches into another's fields:

    window        the conversation buffer (adaptive FIFO, §3.3): the prompt's history,
                  pruned by intensity after each exchange
    recent        focus vectors of the last cycles, newest last: the context of
                  attention's novelty, the gut's reading and the exit gate's focus
    active_ids    the situational memories of the last context: recall's spreading
                  seeds (context inertia, §3.2)
    last_system2  when System 2 last answered: the FIFO intensity's System 2 recency
    said          what the mind said to the user lately, newest last, beyond what the
                  window still holds: the unprompted bar's "not a repeat" (acting.py)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from src.context.fifo import AdaptiveFifo


@dataclass
class Conversation:
    """The state carried between cycles; written by the steps that own each field."""

    window: AdaptiveFifo
    recent_limit: int                                    # focus vectors kept (`loop.recent_context`)
    recent: list[np.ndarray] = field(default_factory=list)
    active_ids: list[int] = field(default_factory=list)  # written by context assembly
    last_system2: datetime | None = None                  # written by the gate-and-store step
    said: list[str] = field(default_factory=list)         # written by delivery (acting.py)

    def said_to_user(self, text: str, keep: int) -> None:
        """`text` was said to the user; the newest `keep` are kept."""
        self.said = (self.said + [text])[-keep:] if keep > 0 else []

    def earlier(self) -> list[str]:
        """Everything said lately, by anyone: the replies said to the user and the window's
        messages (their words, without a mark or frame), each once."""
        return list(dict.fromkeys([*self.said, *(m.said for m in self.window.messages)]))

    def attended_to(self, focus: np.ndarray | None) -> None:
        """The cycle's focus joins the recent context (after its exchange was kept)."""
        if focus is not None:
            self.recent = (self.recent + [focus])[-self.recent_limit:]
