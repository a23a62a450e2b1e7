"""What the gut puts in front of a model (plan §5.1).

An intense, unusual gut reading becomes input for the loop (`gut` source, framed as the
mind's own signal by src/loop/prompts.py): `gut_signal` is that thought. The short
[GUT] line of System 1's context is a reading, rendered by `Gut.summary`.
"""

from __future__ import annotations

from src.text import excerpt

#: Characters of the focus a gut signal names.
FOCUS_CHARS = 120


def gut_signal(feeling: str, intensity: float, focus: str) -> str:
    """The gut signal: how strong (`feeling` describes `intensity`), and about what focus."""
    return (f"A {feeling} in my gut (intensity {intensity:.2f}) "
            f"while attending to: {excerpt(focus, FOCUS_CHARS)}. What is it telling me?")
