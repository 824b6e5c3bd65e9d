-- +goose Up
-- Scaling plans (R-SP, SPEC §8, store/scaling.go). A plan's schedules
-- are one JSON document (they are read and written whole); its pools are
-- rows of scaling_plan_pools, whose primary key on the pool is what makes
-- "a pool is in at most one plan" (R-SP4) hold against concurrent PUTs.
CREATE TABLE scaling_plans (
    name           TEXT PRIMARY KEY,
    description    TEXT NOT NULL,
    time_zone      TEXT NOT NULL,
    host_pool_type TEXT NOT NULL,
    schedules      TEXT NOT NULL, -- JSON list of schedules
    create_time    INTEGER NOT NULL,
    update_time    INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE scaling_plan_pools (
    host_pool TEXT PRIMARY KEY,
    plan      TEXT NOT NULL,
    position  INTEGER NOT NULL -- the pool's place in the plan's hostPools
) WITHOUT ROWID;
CREATE INDEX scaling_plan_pools_by_plan ON scaling_plan_pools (plan, position);

-- +goose Down
DROP TABLE scaling_plan_pools;
DROP TABLE scaling_plans;
