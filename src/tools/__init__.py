"""Tools the model can call. Each returns text and never raises into the loop."""

from __future__ import annotations

from src.tools.read_docs import (
    LIST_DOCS_TOOL,
    READ_DOC_TOOL,
    DocsTool,
    DocsToolSettings,
    list_docs,
    read_doc,
)

__all__ = ["LIST_DOCS_TOOL", "READ_DOC_TOOL", "DocsTool", "DocsToolSettings", "list_docs",
           "read_doc"]
