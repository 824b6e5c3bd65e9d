-- +goose Up
-- Times are Unix nanoseconds (UTC) in both dialects, so the Go code shares
-- every query. JSON columns hold the nested domain values.
CREATE TABLE host_pools (
    name                                 TEXT PRIMARY KEY,
    host_pool_type                       TEXT NOT NULL,
    load_balancer_type                   TEXT NOT NULL,
    max_session_limit                    INTEGER NOT NULL,
    personal_desktop_assignment_type     TEXT NOT NULL,
    load_balancing                       TEXT NOT NULL,
    heartbeat_timeout_seconds            INTEGER NOT NULL,
    pending_timeout_seconds              INTEGER NOT NULL,
    disconnected_session_timeout_minutes INTEGER NOT NULL,
    description                          TEXT NOT NULL,
    friendly_name                        TEXT NOT NULL,
    create_time                          INTEGER NOT NULL,
    update_time                          INTEGER NOT NULL
);

CREATE TABLE session_hosts (
    host_pool           TEXT NOT NULL,
    name                TEXT NOT NULL,
    address             TEXT NOT NULL,
    protocols           TEXT NOT NULL,
    standard_features   BOOLEAN NOT NULL,
    allow_new_session   BOOLEAN NOT NULL,
    assigned_users      TEXT NOT NULL,
    last_heartbeat      INTEGER,
    -- sessions and connecting_sessions are the R-S1 counts, kept current by
    -- every transaction that changes a session's state; R-C4 is the
    -- conditional increment of sessions in CommitPlacement (R-D3).
    sessions            INTEGER NOT NULL DEFAULT 0 CHECK (sessions >= 0),
    connecting_sessions INTEGER NOT NULL DEFAULT 0 CHECK (connecting_sessions >= 0),
    metrics             TEXT,
    metrics_sessions    INTEGER NOT NULL DEFAULT 0,
    policy              TEXT NOT NULL,
    shutting_down       BOOLEAN NOT NULL DEFAULT FALSE,
    health_error        TEXT NOT NULL DEFAULT '',
    credential_hash     TEXT UNIQUE,
    create_time         INTEGER NOT NULL,
    PRIMARY KEY (host_pool, name)
);

CREATE TABLE user_sessions (
    id               TEXT PRIMARY KEY,
    host_pool        TEXT NOT NULL,
    session_host     TEXT NOT NULL,
    user_name        TEXT NOT NULL,
    state            TEXT NOT NULL,
    create_time      INTEGER NOT NULL,
    state_time       INTEGER NOT NULL,
    agent_session_id TEXT NOT NULL DEFAULT '',
    end_reason       TEXT NOT NULL DEFAULT '',
    -- pooled marks a session placed in a pooled pool: R-C6 is the unique
    -- index below (adopted sessions are not pooled: they are facts).
    pooled           BOOLEAN NOT NULL DEFAULT FALSE,
    -- logoff_queued is set once the R-S5 logoff command has been queued for
    -- the current disconnection.
    logoff_queued    BOOLEAN NOT NULL DEFAULT FALSE,
    placement        BLOB
);
CREATE UNIQUE INDEX user_sessions_one_per_pooled_user
    ON user_sessions (host_pool, user_name) WHERE pooled AND state <> 'LoggedOff';
CREATE INDEX user_sessions_open_by_host
    ON user_sessions (host_pool, session_host) WHERE state <> 'LoggedOff';
CREATE INDEX user_sessions_by_pool ON user_sessions (host_pool, id);

CREATE TABLE commands (
    -- seq orders a host's commands as they were queued.
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    id               TEXT NOT NULL UNIQUE,
    host_pool        TEXT NOT NULL,
    session_host     TEXT NOT NULL,
    type             TEXT NOT NULL,
    session_id       TEXT NOT NULL,
    agent_session_id TEXT NOT NULL,
    user_name        TEXT NOT NULL,
    message          TEXT NOT NULL,
    state            TEXT NOT NULL,
    result           TEXT NOT NULL,
    create_time      INTEGER NOT NULL
);
CREATE INDEX commands_by_host ON commands (host_pool, session_host, state, seq);

CREATE TABLE tokens (
    id          TEXT PRIMARY KEY,
    role        TEXT NOT NULL,
    subject     TEXT NOT NULL,
    hash        TEXT NOT NULL UNIQUE,
    create_time INTEGER NOT NULL,
    expire_time INTEGER
);

CREATE TABLE registration_tokens (
    id          TEXT PRIMARY KEY,
    host_pool   TEXT NOT NULL,
    hash        TEXT NOT NULL UNIQUE,
    create_time INTEGER NOT NULL,
    expire_time INTEGER NOT NULL
);
CREATE INDEX registration_tokens_by_pool ON registration_tokens (host_pool);

-- +goose Down
DROP TABLE registration_tokens;
DROP TABLE tokens;
DROP TABLE commands;
DROP TABLE user_sessions;
DROP TABLE session_hosts;
DROP TABLE host_pools;
