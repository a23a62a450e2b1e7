"""`skills:` in runtime.yaml. Pure: no feature imports."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SkillsSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # The "skills available" section of every System 1 prompt is capped at this many
    # tokens (counted by src/tokens.py); the conversation window gives way to it.
    prompt_max_tokens: int = Field(300, ge=0)
    # RECALL_SKILL and /skill show accept a misspelt label when difflib's ratio to an
    # existing one reaches this.
    fuzzy_cutoff: float = Field(0.6, gt=0, le=1)
    # /skill save drafts from at most this many recent messages of the conversation.
    draft_messages: int = Field(20, ge=1)
    draft_max_tokens: int = Field(1024, ge=64)
    # each message quoted to the drafting model is cut to this many characters
    draft_message_chars: int = Field(2000, ge=100)
    # a procedure handed to the model by RECALL_SKILL is cut to this many characters
    recall_max_chars: int = Field(8000, ge=200)


class SkillProposalSettings(BaseModel):
    """`consolidation.skills:` — the deep pass proposing skills from procedural memories."""

    model_config = ConfigDict(extra="forbid")

    # cosine between a cluster's leader and each member (stored document embeddings)
    similarity: float = Field(0.8, gt=0, le=1)
    min_memories: int = Field(3, ge=2)       # a pattern: met at least this many times
    max_per_pass: int = Field(2, ge=0)       # drafting calls per deep pass, at most
    scan: int = Field(500, ge=2)             # newest procedural memories clustered per pass
