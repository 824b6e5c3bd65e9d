-- +goose Up
-- How many sessions placed during a store outage (R-OUT3) were written,
-- by any replica: one row, bumped in the transaction that writes each
-- (PlacementCommit.OutagePlacement). Such a session's id was made during
-- the outage, older than the session directory's passes look back
-- (R-G1); every replica of the pod reads this count, sends its whole
-- list when it changed, and says it is behind until then, whichever
-- replica wrote them.
CREATE TABLE outage_placement_writes (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    writes BIGINT NOT NULL
);
INSERT INTO outage_placement_writes (id, writes) VALUES (1, 0);

-- +goose Down
DROP TABLE outage_placement_writes;
