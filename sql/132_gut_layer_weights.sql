-- The gut's layer weights as consolidation evolved them (plan §5.1: "layer weights are
-- starting points — consolidation evolves them"; src/gut/layers.py). One row per step,
-- the newest is current; no row = the settings' starting points.
CREATE TABLE gut_layer_weights (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL,
    l0          DOUBLE PRECISION NOT NULL CHECK (l0 >= 0),
    l1          DOUBLE PRECISION NOT NULL CHECK (l1 >= 0),
    l2          DOUBLE PRECISION NOT NULL CHECK (l2 >= 0),
    before      JSONB NOT NULL,
    evidence    JSONB NOT NULL,
    CHECK (abs(l0 + l1 + l2 - 1) < 1e-6)
);
