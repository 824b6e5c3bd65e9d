-- +goose Up
-- Signed-in browsers (R-SEC, "Web sessions"), shared by every replica and
-- kept over restarts. The cookie's value is not stored: id_hash is its
-- SHA-256, and sealed is the session's API token encrypted with a key
-- derived from it. Bounded per principal and per area (WebSessionLimits);
-- expired rows are swept on a timer.
CREATE TABLE web_sessions (
    id_hash     TEXT COLLATE "C" PRIMARY KEY,
    area        TEXT COLLATE "C" NOT NULL,
    principal   TEXT COLLATE "C" NOT NULL,
    role        TEXT NOT NULL,
    sealed      BYTEA NOT NULL,
    flash       TEXT NOT NULL DEFAULT '',
    create_time BIGINT NOT NULL,
    expire_time BIGINT NOT NULL
);
CREATE INDEX web_sessions_by_principal ON web_sessions (area, principal, create_time);
CREATE INDEX web_sessions_by_expiry ON web_sessions (area, expire_time);

-- What every replica must agree on: the admin token's hash, the key of the
-- sign-in state cookies.
CREATE TABLE shared_values (
    name        TEXT COLLATE "C" PRIMARY KEY,
    value       TEXT NOT NULL,
    update_time BIGINT NOT NULL
);

-- +goose Down
DROP TABLE shared_values;
DROP TABLE web_sessions;
