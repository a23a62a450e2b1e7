"""Settings of the tools (runtime.yaml `tools:`; the docs tool, plan §4.10): pure pydantic."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class DocsToolSettings(BaseModel):
    """`tools.docs:` in runtime.yaml. Relative roots are relative to the project root."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    roots: list[str] = Field(default_factory=lambda: ["src", "notes.md", "README.md"])
    max_bytes: int = Field(200_000, ge=1)
    max_list_entries: int = Field(500, ge=1)


class ToolsSettings(BaseModel):
    """`tools:` in runtime.yaml: the tools the mind may call."""

    model_config = ConfigDict(extra="forbid")

    docs: DocsToolSettings = DocsToolSettings()   # read-only project files (src/tools/read_docs.py)
