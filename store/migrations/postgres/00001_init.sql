-- +goose Up
-- Text is COLLATE "C" so names and ids sort byte-wise, as SPEC §1 query
-- order and paging by id require.
-- Times are Unix nanoseconds (UTC) in both dialects, so the Go code shares
-- every query. JSON columns hold the nested domain values.
CREATE TABLE host_pools (
    name                                 TEXT COLLATE "C" PRIMARY KEY,
    host_pool_type                       TEXT COLLATE "C" NOT NULL,
    load_balancer_type                   TEXT COLLATE "C" NOT NULL,
    max_session_limit                    BIGINT NOT NULL,
    personal_desktop_assignment_type     TEXT COLLATE "C" NOT NULL,
    load_balancing                       TEXT COLLATE "C" NOT NULL,
    heartbeat_timeout_seconds            BIGINT NOT NULL,
    pending_timeout_seconds              BIGINT NOT NULL,
    disconnected_session_timeout_minutes BIGINT NOT NULL,
    description                          TEXT COLLATE "C" NOT NULL,
    friendly_name                        TEXT COLLATE "C" NOT NULL,
    create_time                          BIGINT NOT NULL,
    update_time                          BIGINT NOT NULL
);

CREATE TABLE session_hosts (
    host_pool           TEXT COLLATE "C" NOT NULL,
    name                TEXT COLLATE "C" NOT NULL,
    address             TEXT COLLATE "C" NOT NULL,
    protocols           TEXT COLLATE "C" NOT NULL,
    standard_features   BOOLEAN NOT NULL,
    allow_new_session   BOOLEAN NOT NULL,
    assigned_users      TEXT COLLATE "C" NOT NULL,
    last_heartbeat      BIGINT,
    -- sessions and connecting_sessions are the R-S1 counts, kept current by
    -- every transaction that changes a session's state; R-C4 is the
    -- conditional increment of sessions in CommitPlacement (R-D3).
    sessions            BIGINT NOT NULL DEFAULT 0 CHECK (sessions >= 0),
    connecting_sessions BIGINT NOT NULL DEFAULT 0 CHECK (connecting_sessions >= 0),
    metrics             TEXT COLLATE "C",
    metrics_sessions    BIGINT NOT NULL DEFAULT 0,
    policy              TEXT COLLATE "C" NOT NULL,
    shutting_down       BOOLEAN NOT NULL DEFAULT FALSE,
    health_error        TEXT COLLATE "C" NOT NULL DEFAULT '',
    credential_hash     TEXT COLLATE "C" UNIQUE,
    create_time         BIGINT NOT NULL,
    PRIMARY KEY (host_pool, name)
);

CREATE TABLE user_sessions (
    id               TEXT COLLATE "C" PRIMARY KEY,
    host_pool        TEXT COLLATE "C" NOT NULL,
    session_host     TEXT COLLATE "C" NOT NULL,
    user_name        TEXT COLLATE "C" NOT NULL,
    state            TEXT COLLATE "C" NOT NULL,
    create_time      BIGINT NOT NULL,
    state_time       BIGINT NOT NULL,
    agent_session_id TEXT COLLATE "C" NOT NULL DEFAULT '',
    end_reason       TEXT COLLATE "C" NOT NULL DEFAULT '',
    -- pooled marks a session placed in a pooled pool: R-C6 is the unique
    -- index below (adopted sessions are not pooled: they are facts).
    pooled           BOOLEAN NOT NULL DEFAULT FALSE,
    -- logoff_queued is set once the R-S5 logoff command has been queued for
    -- the current disconnection.
    logoff_queued    BOOLEAN NOT NULL DEFAULT FALSE,
    placement        BYTEA
);
CREATE UNIQUE INDEX user_sessions_one_per_pooled_user
    ON user_sessions (host_pool, user_name) WHERE pooled AND state <> 'LoggedOff';
CREATE INDEX user_sessions_open_by_host
    ON user_sessions (host_pool, session_host) WHERE state <> 'LoggedOff';
CREATE INDEX user_sessions_by_pool ON user_sessions (host_pool, id);

CREATE TABLE commands (
    -- seq orders a host's commands as they were queued.
    seq              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id               TEXT COLLATE "C" NOT NULL UNIQUE,
    host_pool        TEXT COLLATE "C" NOT NULL,
    session_host     TEXT COLLATE "C" NOT NULL,
    type             TEXT COLLATE "C" NOT NULL,
    session_id       TEXT COLLATE "C" NOT NULL,
    agent_session_id TEXT COLLATE "C" NOT NULL,
    user_name        TEXT COLLATE "C" NOT NULL,
    message          TEXT COLLATE "C" NOT NULL,
    state            TEXT COLLATE "C" NOT NULL,
    result           TEXT COLLATE "C" NOT NULL,
    create_time      BIGINT NOT NULL
);
CREATE INDEX commands_by_host ON commands (host_pool, session_host, state, seq);

CREATE TABLE tokens (
    id          TEXT COLLATE "C" PRIMARY KEY,
    role        TEXT COLLATE "C" NOT NULL,
    subject     TEXT COLLATE "C" NOT NULL,
    hash        TEXT COLLATE "C" NOT NULL UNIQUE,
    create_time BIGINT NOT NULL,
    expire_time BIGINT
);

CREATE TABLE registration_tokens (
    id          TEXT COLLATE "C" PRIMARY KEY,
    host_pool   TEXT COLLATE "C" NOT NULL,
    hash        TEXT COLLATE "C" NOT NULL UNIQUE,
    create_time BIGINT NOT NULL,
    expire_time BIGINT NOT NULL
);
CREATE INDEX registration_tokens_by_pool ON registration_tokens (host_pool);

-- +goose Down
DROP TABLE registration_tokens;
DROP TABLE tokens;
DROP TABLE commands;
DROP TABLE user_sessions;
DROP TABLE session_hosts;
DROP TABLE host_pools;
