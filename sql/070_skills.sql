-- Skills: procedural memory the mind retrieves on purpose (issue 17).
-- A skill is addressed by its `label` (snake_case); the one line the model sees in
-- every prompt is `label — when_to_use`; the procedure is read only on request
-- (`RECALL_SKILL: <label>`). An edit keeps the previous version in skill_versions;
-- removal is soft (removed_at) so the history and the counters stay readable:
--   SELECT label, version, recommended, used, succeeded, failed FROM skills WHERE removed_at IS NULL;
--   SELECT version, when_to_use, replaced_at FROM skill_versions WHERE skill_id = $1 ORDER BY version;

CREATE TABLE skills (
    id                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    label               TEXT NOT NULL
                        CONSTRAINT skills_label_snake_case CHECK (label ~ '^[a-z][a-z0-9_]{0,63}$'),
    name                TEXT NOT NULL CONSTRAINT skills_name_not_empty CHECK (length(btrim(name)) > 0),
    when_to_use         TEXT NOT NULL
                        CONSTRAINT skills_when_to_use_not_empty CHECK (length(btrim(when_to_use)) > 0),
    procedure           TEXT NOT NULL
                        CONSTRAINT skills_procedure_not_empty CHECK (length(btrim(procedure)) > 0),
    -- where it came from: {"origin": "conversation"|"consolidation"|"operator", "memory_ids": [...],
    -- "session_id": ..., "messages": n, "hint": ...}
    provenance          JSONB NOT NULL DEFAULT '{}'::jsonb,
    version             INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1),
    recommended         INTEGER NOT NULL DEFAULT 0 CHECK (recommended >= 0),
    used                INTEGER NOT NULL DEFAULT 0 CHECK (used >= 0),
    succeeded           INTEGER NOT NULL DEFAULT 0 CHECK (succeeded >= 0),
    failed              INTEGER NOT NULL DEFAULT 0 CHECK (failed >= 0),
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_recalled_at    TIMESTAMPTZ,
    removed_at          TIMESTAMPTZ
);
-- one live skill per label; a removed label can be taken again
CREATE UNIQUE INDEX idx_skills_label_live ON skills (label) WHERE removed_at IS NULL;

CREATE TABLE skill_versions (
    skill_id        BIGINT NOT NULL REFERENCES skills(id) ON DELETE CASCADE,
    version         INTEGER NOT NULL,
    name            TEXT NOT NULL,
    when_to_use     TEXT NOT NULL,
    procedure       TEXT NOT NULL,
    provenance      JSONB NOT NULL,
    written_at      TIMESTAMPTZ NOT NULL,             -- when this version was saved
    replaced_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (skill_id, version)
);
