-- Skills proposed by deep consolidation from a cluster of procedural memories
-- (issue 17). A proposal waits in the operator's approval queue (kind 'skill');
-- approving it creates the skill, rejecting it keeps the cluster from being
-- proposed again. One row per cluster (its fingerprint: the sorted member ids).
-- approval_id has no foreign key: the approvals table belongs to consolidation.
CREATE TABLE skill_proposals (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    fingerprint     TEXT NOT NULL UNIQUE,
    memory_ids      BIGINT[] NOT NULL CHECK (cardinality(memory_ids) > 0),
    draft           JSONB NOT NULL,
    approval_id     BIGINT,
    skill_id        BIGINT REFERENCES skills(id) ON DELETE SET NULL,
    status          TEXT NOT NULL DEFAULT 'pending' CONSTRAINT skill_proposals_status_known
                    CHECK (status IN ('pending', 'approved', 'rejected')),
    created_at      TIMESTAMPTZ NOT NULL,
    decided_at      TIMESTAMPTZ
);
