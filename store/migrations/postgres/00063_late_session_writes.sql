-- +goose Up
-- How many sessions each group committer wrote late (R-G1: outage
-- placements, R-OUT3, and sessions committed LateCommit or more after
-- their id was made): one row per committer of each store open
-- (committer, a random key), bumped in the transaction that writes them.
-- A committer's batches run one after another and no other writer's
-- batch touches its row, so no batch waits for another's count, on one
-- replica or across replicas. The store's count is row 1 of
-- outage_placement_writes plus every row here: row 1 takes the bumps of
-- replicas older than this migration (a rolling upgrade) and the rows
-- here not bumped for an hour, folded into it at each open in one
-- transaction, so the sum never decreases. bumped is the last bump's
-- time (Unix ns, the writer's clock).
CREATE TABLE late_session_writes (
    committer TEXT PRIMARY KEY,
    writes    BIGINT NOT NULL,
    bumped    BIGINT NOT NULL
);

-- +goose Down
-- The count stays whole: every row goes into row 1, bumps still open
-- included (replicas of this version may run meanwhile): the table's
-- lock waits for them, and holds later ones until the table is gone.
-- Row 1 first, as a fold (foldLateWrites) locks them: the other way
-- round, each would wait for the other.
SELECT writes FROM outage_placement_writes WHERE id = 1 FOR UPDATE;
LOCK TABLE late_session_writes IN ACCESS EXCLUSIVE MODE;
UPDATE outage_placement_writes
    SET writes = writes + (SELECT COALESCE(SUM(writes), 0) FROM late_session_writes)
    WHERE id = 1;
DROP TABLE late_session_writes;
