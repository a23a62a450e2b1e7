"""What the gut puts in front of a model (plan §5.1).

An intense, unusual gut reading becomes input for the loop (`gut` source, framed as the
mind's own signal by src/loop/prompts.py): `gut_signal` is that thought. The short
[GUT] line of System 1's context is a reading, rendered by `Gut.summary`.
"""

from __future__ import annotations

#: What a gut signal says it arose from, by the attended input's source: never that input's
#: words — quoted, a user's line read like a second answer to it in the logs and the
#: window (issue 41); the model has the conversation, and the signal's time says which turn.
ABOUT = {"user": "the user's last message", "dmn": "a thought of my own", "consolidation": "an insight of mine",
         "gut": "a feeling", "scheduled": "a scheduled task", "tool": "what a tool returned"}


def gut_signal(feeling: str, intensity: float, source: str) -> str:
    """The gut signal: how strong (`feeling` describes `intensity`), and what it arose from."""
    about = ABOUT.get(source, "what I was attending to")
    return f"My gut: {feeling} (intensity {intensity:.2f}) while attending to {about}. What is it telling me?"
