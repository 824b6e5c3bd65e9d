-- +goose Up
-- A host's R-S1 counts move out of its wide row into a narrow table of their
-- own: every connect changes them (R-C4's conditional increment), and a
-- narrow row is a small update. The counts row is also the host's lock
-- (lockHost): every transaction that changes a host's sessions or its row
-- locks it first.
-- Every replica must run this version: one that still reads the dropped
-- columns fails its queries.
-- The copy must not miss a count another replica changes meanwhile: lock
-- the hosts first, waiting at most 10 s (then the migration fails and runs
-- again at the next start).
SET LOCAL lock_timeout = '10s';
LOCK TABLE session_hosts IN EXCLUSIVE MODE;
CREATE TABLE host_counts (
    host_pool           TEXT NOT NULL,
    name                TEXT NOT NULL,
    sessions            INTEGER NOT NULL DEFAULT 0 CHECK (sessions >= 0),
    connecting_sessions INTEGER NOT NULL DEFAULT 0 CHECK (connecting_sessions >= 0),
    PRIMARY KEY (host_pool, name)
);
INSERT INTO host_counts (host_pool, name, sessions, connecting_sessions)
    SELECT host_pool, name, sessions, connecting_sessions FROM session_hosts;
ALTER TABLE session_hosts DROP COLUMN sessions, DROP COLUMN connecting_sessions;

-- +goose Down
ALTER TABLE session_hosts ADD COLUMN sessions INTEGER NOT NULL DEFAULT 0 CHECK (sessions >= 0),
    ADD COLUMN connecting_sessions INTEGER NOT NULL DEFAULT 0 CHECK (connecting_sessions >= 0);
UPDATE session_hosts h SET sessions = c.sessions, connecting_sessions = c.connecting_sessions
    FROM host_counts c WHERE c.host_pool = h.host_pool AND c.name = h.name;
DROP TABLE host_counts;
