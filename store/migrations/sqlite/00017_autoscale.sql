-- +goose Up
-- The autoscaler (R-A1..R-A3).

-- The lease that lets exactly one replica evaluate at a time: one row,
-- taken and renewed with a conditional UPDATE (store/autoscale.go).
CREATE TABLE autoscale_lease (
    name        TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    expire_time INTEGER NOT NULL
);

-- Every evaluation of a pool, as JSON (vdibroker.AutoscaleEvaluation).
CREATE TABLE autoscale_evaluations (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    host_pool TEXT NOT NULL,
    time      INTEGER NOT NULL,
    record    TEXT NOT NULL
);
CREATE INDEX autoscale_evaluations_by_pool ON autoscale_evaluations (host_pool, seq);
CREATE INDEX autoscale_evaluations_by_time ON autoscale_evaluations (time);

-- What the autoscaler remembers of a pool between evaluations (the
-- admin's load balancer, the hosts it drains and since when), as JSON
-- (vdibroker.AutoscaleState), so another replica carries on.
CREATE TABLE autoscale_state (
    host_pool   TEXT PRIMARY KEY,
    state       TEXT NOT NULL,
    update_time INTEGER NOT NULL
);

-- +goose Down
DROP TABLE autoscale_state;
DROP TABLE autoscale_evaluations;
DROP TABLE autoscale_lease;
