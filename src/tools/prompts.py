"""What the tools tell a model about themselves (plan §4.10).

Each offered verb is one line of the system prompt's tool section (the line's frame is
the loop's, src/loop/prompts.py `tool_line`): when to use it, then its usage. These are
the docs verbs' "when" sentences (src/tools/docs_verb.py).
"""

from __future__ import annotations


def read_doc_when(readable: str) -> str:
    """READ_DOC's sentence; `readable` lists the files it may read."""
    return ("Only when the message asks how you work or about your own code or notes: read one of "
            f"your files (read-only). Readable: {readable}.")


LIST_DOCS_WHEN = "Only with READ_DOC, when you do not know which file to read: list your readable files."
