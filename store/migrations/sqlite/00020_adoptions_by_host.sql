-- +goose Up
-- A host's adoptions by time (R-S2): reconciliation counts the sessions a
-- host adopted in the last vdibroker.AdoptionWindow, ended ones included,
-- before it adopts more (the adoption budget), so that one host's
-- credential cannot fill the store by reporting new users heartbeat after
-- heartbeat. Partial: only adopted rows, which are few.
CREATE INDEX user_sessions_adopted_by_host
    ON user_sessions (host_pool, session_host, create_time) WHERE adopted;

-- +goose Down
DROP INDEX user_sessions_adopted_by_host;
