-- +goose Up
-- The R-LI4 round-robin cursor of each pool: the host last chosen in bucket
-- 1, written by the placement commit that chose it, so that every replica
-- and a restarted one go on from the host after it. A table of its own,
-- not a column of host_pools: a commit must not change the pool's row,
-- whose update_time identifies its settings (R-P1, ErrPoolChanged).
CREATE TABLE pool_cursors (
    host_pool        TEXT PRIMARY KEY,
    round_robin_host TEXT NOT NULL
) WITHOUT ROWID;

-- +goose Down
DROP TABLE pool_cursors;
