-- +goose Up
-- Signed-in browsers (R-SEC, "Web sessions"), shared by every replica and
-- kept over restarts. The cookie's value is not stored: id_hash is its
-- SHA-256, and sealed is the session's API token encrypted with a key
-- derived from it. Bounded per principal and per area (WebSessionLimits);
-- expired rows are swept on a timer.
CREATE TABLE web_sessions (
    id_hash     TEXT PRIMARY KEY,
    area        TEXT NOT NULL,
    principal   TEXT NOT NULL,
    role        TEXT NOT NULL,
    sealed      BLOB NOT NULL,
    flash       TEXT NOT NULL DEFAULT '',
    create_time INTEGER NOT NULL,
    expire_time INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX web_sessions_by_principal ON web_sessions (area, principal, create_time);
CREATE INDEX web_sessions_by_expiry ON web_sessions (area, expire_time);

-- What every replica must agree on: the admin token's hash, the key of the
-- sign-in state cookies.
CREATE TABLE shared_values (
    name        TEXT PRIMARY KEY,
    value       TEXT NOT NULL,
    update_time INTEGER NOT NULL
) WITHOUT ROWID;

-- +goose Down
DROP TABLE shared_values;
DROP TABLE web_sessions;
