-- +goose Up
-- R-OUT2, serve --outage-placement: each replica's reserved share of a
-- host's free slots, which it may fill while the database is down. Normal
-- placement on every replica counts the other replicas' unexpired escrows
-- against the host's maxSessionLimit. A replica renews its rows while the
-- store is up, deletes them on a clean shutdown, and the rows of one that
-- never comes back expire (expire_time, Unix ns).
CREATE TABLE outage_escrow (
    replica     TEXT COLLATE "C" NOT NULL,
    host_pool   TEXT COLLATE "C" NOT NULL,
    host        TEXT COLLATE "C" NOT NULL,
    slots       BIGINT NOT NULL CHECK (slots > 0),
    expire_time BIGINT NOT NULL,
    PRIMARY KEY (host_pool, host, replica)
);
CREATE INDEX outage_escrow_by_replica ON outage_escrow (replica);

-- The write probe of the health check (R-OUT1): a ping updates this one
-- row, so a database that takes no writes (disk full, a read-only standby
-- after a failover) is an outage even while reads still work.
CREATE TABLE store_probe (
    id   BIGINT PRIMARY KEY CHECK (id = 1),
    n    BIGINT NOT NULL,
    time BIGINT NOT NULL
);
INSERT INTO store_probe (id, n, time) VALUES (1, 0, 0);

-- +goose Down
DROP TABLE store_probe;
DROP TABLE outage_escrow;
