"""`skills:` in runtime.yaml. Pure: no feature imports."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SkillsSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # The "skills available" section of a System 1 prompt is capped at this many tokens
    # (counted by src/tokens.py); the conversation window gives way to it.
    prompt_max_tokens: int = Field(300, ge=0)
    # The section and RECALL_SKILL are offered only for a focus near a skill: the cosine of
    # the focus to the skill's cue (label, name, when_to_use, start of the procedure) at
    # least this, per embed model ("default" for any other). A skills line in every prompt
    # made a small model answer "what's my job?" with RECALL_SKILL. Chosen on the labelled
    # related and unrelated focuses of tests/test_skills_relevance.py: for each offline model
    # the highest value that still offers every related focus its skill (MiniLM), or that
    # offers no unrelated one (wordllama, whose two sets overlap: precision first); the
    # numbers are in notes.md "skills (issue 38 item 5)". "default" is not measured.
    near_similarity: dict[str, float] = Field(
        default_factory=lambda: {"default": 0.3, "minilm-l6-v2-int8": 0.3, "wordllama-l2-supercat-256": 0.28})
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

    def near_floor(self, embed_model: str | None) -> float:
        """The `near_similarity` of `embed_model`, else its "default"."""
        found = self.near_similarity.get(embed_model or "", self.near_similarity.get("default"))
        return 0.3 if found is None else found


class SkillProposalSettings(BaseModel):
    """`consolidation.skills:` — the deep pass proposing skills from procedural memories."""

    model_config = ConfigDict(extra="forbid")

    # cosine between a cluster's leader and each member (stored document embeddings)
    similarity: float = Field(0.8, gt=0, le=1)
    min_memories: int = Field(3, ge=2)       # a pattern: met at least this many times
    max_per_pass: int = Field(2, ge=0)       # drafting calls per deep pass, at most
    scan: int = Field(500, ge=2)             # newest procedural memories clustered per pass
