-- +goose Up
-- R-OUT2, serve --outage-placement: each replica's reserved share of a
-- host's free slots, which it may fill while the database is down. Normal
-- placement on every replica counts the other replicas' unexpired escrows
-- against the host's maxSessionLimit. A replica renews its rows while the
-- store is up, deletes them on a clean shutdown, and the rows of one that
-- never comes back expire (expire_time, Unix ns).
CREATE TABLE outage_escrow (
    replica     TEXT NOT NULL,
    host_pool   TEXT NOT NULL,
    host        TEXT NOT NULL,
    slots       INTEGER NOT NULL CHECK (slots > 0),
    expire_time INTEGER NOT NULL,
    PRIMARY KEY (host_pool, host, replica)
) WITHOUT ROWID;
CREATE INDEX outage_escrow_by_replica ON outage_escrow (replica);

-- The write probe of the health check (R-OUT1): a ping updates this one
-- row in a transaction of its own, so a disk that is full, read-only or
-- failing is an outage even while reads still work.
CREATE TABLE store_probe (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    n    INTEGER NOT NULL,
    time INTEGER NOT NULL
);
INSERT INTO store_probe (id, n, time) VALUES (1, 0, 0);

-- +goose Down
DROP TABLE store_probe;
DROP TABLE outage_escrow;
