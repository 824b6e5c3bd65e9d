-- +goose Up
-- Who drained a host and when (store/drain.go): written by the API's
-- PATCH of allowNewSession, shown by the console's host page and
-- `vdibroker sessionhost show`. A table of its own, read only by the admin
-- reads, so connects and heartbeats never touch it.
CREATE TABLE host_drains (
    host_pool  TEXT COLLATE "C" NOT NULL,
    name       TEXT COLLATE "C" NOT NULL,
    drained_by TEXT NOT NULL,
    drain_time BIGINT NOT NULL,
    PRIMARY KEY (host_pool, name)
);

-- +goose Down
DROP TABLE host_drains;
