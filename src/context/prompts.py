"""The headings of the memory part of the system prompt (plan §3.2).

Context assembly (src/context/assembly.py) renders three sections, each under its
heading; the lines under them are the memories themselves (`tracks.render_line`).
"""

from __future__ import annotations

IMMUTABLE_HEADER = "Boundaries (always hold):"
IDENTITY_HEADER = "Who I am (what surfaced this cycle):"
SITUATIONAL_HEADER = "Relevant memories:"
