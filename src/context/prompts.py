"""The headings of the memory part of the system prompt (plan §3.2).

Context assembly (src/context/assembly.py) renders three sections, each under its
heading; the lines under them are the memories themselves (`tracks.render_line`).
"""

from __future__ import annotations

IMMUTABLE_HEADER = "Boundaries (always hold):"
IDENTITY_HEADER = "Who I am (what surfaced this cycle):"
SITUATIONAL_HEADER = "Relevant memories:"
#: Before an answer the mind gave only to itself, in the conversation window (src/context/
#: fifo.py): a thought of its own, not something the user was told (issue 27).
THOUGHT_MARK = "[my own thought, not said to the user] "
#: After an input cut to fit the model's context window (src/context/request.py): the model
#: reads that it has only the beginning, and can say so.
INPUT_CUT = "\n\n[… cut here: this message is longer than the context window holds; only its beginning is shown]"
