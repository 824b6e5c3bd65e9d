-- +goose Up
-- A host's R-S1 counts move out of its wide row into a narrow table of their
-- own. Every connect changes its host's counts (R-C4's conditional
-- increment); in the wide table the hosts of one group commit sat on as
-- many pages as there were hosts, each written to the WAL whole (about a
-- quarter of the pages a connect wrote). Here a page holds about a hundred
-- hosts' counts, so a group commit of many connects writes a few pages.
-- new_sessions_allowed is a copy of session_hosts.allow_new_session,
-- written with it, so that the conditional increment checks drain mode
-- (R-C2) on the row it updates (see the PostgreSQL migration for why).
CREATE TABLE host_counts (
    host_pool            TEXT NOT NULL,
    name                 TEXT NOT NULL,
    sessions             INTEGER NOT NULL DEFAULT 0 CHECK (sessions >= 0),
    connecting_sessions  INTEGER NOT NULL DEFAULT 0 CHECK (connecting_sessions >= 0),
    new_sessions_allowed BOOLEAN NOT NULL DEFAULT TRUE,
    PRIMARY KEY (host_pool, name)
) WITHOUT ROWID;
INSERT INTO host_counts (host_pool, name, sessions, connecting_sessions, new_sessions_allowed)
    SELECT host_pool, name, sessions, connecting_sessions, allow_new_session FROM session_hosts;
ALTER TABLE session_hosts DROP COLUMN sessions;
ALTER TABLE session_hosts DROP COLUMN connecting_sessions;

-- +goose Down
ALTER TABLE session_hosts ADD COLUMN sessions INTEGER NOT NULL DEFAULT 0 CHECK (sessions >= 0);
ALTER TABLE session_hosts ADD COLUMN connecting_sessions INTEGER NOT NULL DEFAULT 0 CHECK (connecting_sessions >= 0);
UPDATE session_hosts SET
    sessions = (SELECT c.sessions FROM host_counts c WHERE c.host_pool = session_hosts.host_pool AND c.name = session_hosts.name),
    connecting_sessions = (SELECT c.connecting_sessions FROM host_counts c WHERE c.host_pool = session_hosts.host_pool AND c.name = session_hosts.name);
DROP TABLE host_counts;
