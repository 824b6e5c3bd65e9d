-- +goose Up
-- A pool's open sessions in id order (ids sort by creation time). The
-- broker's views catch up with the sessions opened since their last look
-- (broker views.catchUpUsers: id > cursor, open only, 20,000 at a time,
-- every maintenance tick), so that during a store outage a replica can
-- answer the reconnects of users placed elsewhere or before a restart.
-- Without this index that read walks user_sessions_by_pool: after a
-- restart on a week of history (bench pod: 2.65 million LoggedOff rows in
-- one pool) every history row is read before the first open one, the read
-- outlasts the store timeout, the cursor never moves, and the walk starts
-- again on every tick (29% of the broker's CPU while bench pod measured).
-- Partial: history rows are not in it; a connect's insert adds one entry
-- at the end of its pool's range, and a session leaves it when it ends.
CREATE INDEX user_sessions_open_by_pool
    ON user_sessions (host_pool, id) WHERE state <> 'LoggedOff';

-- +goose Down
DROP INDEX user_sessions_open_by_pool;
