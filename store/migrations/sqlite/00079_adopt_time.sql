-- +goose Up
-- When the broker adopted a session (R-S2), by its own clock: the
-- adoption budget counts the sessions a host adopted in the last
-- vdibroker.AdoptionWindow by it. create_time is the logon time the host
-- reported (vdibroker.AdoptedCreateTime), up to a year back: counted by
-- it, a host's credential reporting its new users as logged on two hours
-- ago adopted 200 of them a heartbeat, not 200 an hour (R-SEC). The rows
-- adopted before take their create_time, as they were counted.
ALTER TABLE user_sessions ADD COLUMN adopt_time INTEGER NOT NULL DEFAULT 0;
UPDATE user_sessions SET adopt_time = create_time WHERE adopted;
DROP INDEX user_sessions_adopted_by_host;
CREATE INDEX user_sessions_adopted_by_host_time
    ON user_sessions (host_pool, session_host, adopt_time) WHERE adopted;

-- +goose Down
DROP INDEX user_sessions_adopted_by_host_time;
CREATE INDEX user_sessions_adopted_by_host
    ON user_sessions (host_pool, session_host, create_time) WHERE adopted;
ALTER TABLE user_sessions DROP COLUMN adopt_time;
