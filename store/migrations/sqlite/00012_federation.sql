-- +goose Up
-- The federation document (SPEC §7) this pod holds: one row, the document
-- as JSON, its generation beside it so the generation check of
-- PutFederation reads one column. Each pod keeps its own copy, so no pod
-- depends on another to know the configuration.
CREATE TABLE federation (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    generation  INTEGER NOT NULL,
    document    TEXT NOT NULL,
    update_time INTEGER NOT NULL
);

-- +goose Down
DROP TABLE federation;
