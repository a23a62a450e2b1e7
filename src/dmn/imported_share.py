"""Imported strangers' share of the idle mind (issue 38 item 7). Pure.

A store can hold far more of other people's conversations (imported chats) than of the
user's words and the mind's own. Drawn by their number, the DMN's thoughts were all about
strangers: every idle cycle's model calls went to people the mind never met. So a memory of
an imported stranger (src/dmn/sampling.imported_stranger) may seed at most `share` of the
DMN's chances to think, over the last `window` of them:

    a chance may go to a stranger  iff  strangers among the chances counted + 1
                                         ≤ share × (chances counted + 1)

where the chances counted are the last `window − 1` (fewer at the start, so the share holds
from the first chance instead of letting the first `share × window` all go to strangers).
Every `window` consecutive chances then hold at most `share × window` strangers' thoughts.

A chance is a tick that got past suppression, the pending limit and the background budget
(src/dmn/generator.py). When a stranger may not have it, the draw leaves imported strangers
out and the user's and the mind's own memories seed the thought; when the pool holds
nothing else (a store of imported chats only), the chance stays quiet and counts as one not
given to a stranger: such a store still thinks, `share` of the time, and spends no more.
Counted in chances, not in time: the pacing already spaces chances out (src/dmn/pacing.py).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

# share × counted is compared with a count: 0.29 × 100 is 28.999999999999996 in floats
_EPS = 1e-9


@dataclass
class ImportedShare:
    """The sliding window of the DMN's recent chances: which went to an imported stranger."""

    share: float
    window: int
    _recent: deque[bool] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.share <= 1.0 or self.window < 2:
            raise ValueError(f"imported share {self.share} must be in [0, 1] and its window {self.window} at least 2")
        self._recent = deque(maxlen=self.window - 1)

    def allows(self) -> bool:
        """May this chance's thought be seeded by an imported stranger's memory?"""
        if self.share >= 1.0:
            return True
        return sum(self._recent) + 1 <= self.share * (len(self._recent) + 1) + _EPS

    def record(self, stranger: bool) -> None:
        """One chance taken: `stranger` when an imported stranger's memory seeded its thought."""
        self._recent.append(bool(stranger))

    def describe(self) -> str:
        """For a tick's reason: the strangers' thoughts among the recent chances, and the share."""
        return (f"{sum(self._recent)} of the last {len(self._recent)} chances went to imported strangers; "
                f"their share is {self.share:.0%}")
