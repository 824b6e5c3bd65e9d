-- +goose Up
-- A host's R-S1 counts move out of its wide row into a narrow table of their
-- own: every connect changes them (R-C4's conditional increment), and a
-- narrow row is a small update. The counts row is also the host's lock
-- (lockHost): every transaction that changes a host's sessions or its row
-- locks it first.
-- new_sessions_allowed is a copy of session_hosts.allow_new_session,
-- written with it under that lock. The conditional increment checks drain
-- mode (R-C2) on the row it updates: a connect that waited for a drain's
-- lock is then checked again against the drained row, which a condition
-- on another table's row (read as of the statement's start) would not be.
-- Every replica must run this version: one that still uses the dropped
-- columns fails its queries.
-- The copy must not miss a count another replica changes meanwhile, and
-- DROP COLUMN needs the strongest lock anyway: take it first, waiting at
-- most 10 s (then the migration fails and runs again at the next start).
SET LOCAL lock_timeout = '10s';
LOCK TABLE session_hosts IN ACCESS EXCLUSIVE MODE;
CREATE TABLE host_counts (
    host_pool            TEXT COLLATE "C" NOT NULL,
    name                 TEXT COLLATE "C" NOT NULL,
    sessions             BIGINT NOT NULL DEFAULT 0 CHECK (sessions >= 0),
    connecting_sessions  BIGINT NOT NULL DEFAULT 0 CHECK (connecting_sessions >= 0),
    new_sessions_allowed BOOLEAN NOT NULL DEFAULT TRUE,
    PRIMARY KEY (host_pool, name)
);
INSERT INTO host_counts (host_pool, name, sessions, connecting_sessions, new_sessions_allowed)
    SELECT host_pool, name, sessions, connecting_sessions, allow_new_session FROM session_hosts;
ALTER TABLE session_hosts DROP COLUMN sessions, DROP COLUMN connecting_sessions;

-- +goose Down
SET LOCAL lock_timeout = '10s';
LOCK TABLE session_hosts IN ACCESS EXCLUSIVE MODE;
ALTER TABLE session_hosts ADD COLUMN sessions BIGINT NOT NULL DEFAULT 0 CHECK (sessions >= 0),
    ADD COLUMN connecting_sessions BIGINT NOT NULL DEFAULT 0 CHECK (connecting_sessions >= 0);
UPDATE session_hosts h SET sessions = c.sessions, connecting_sessions = c.connecting_sessions
    FROM host_counts c WHERE c.host_pool = h.host_pool AND c.name = h.name;
DROP TABLE host_counts;
