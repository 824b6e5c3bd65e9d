-- +goose NO TRANSACTION
-- CONCURRENTLY, outside a transaction, as 00020: building the index on a
-- large shared history must not block the replicas' writes. A failed
-- build leaves an INVALID index, dropped and built anew at the next start.
-- +goose Up
-- When the broker adopted a session (R-S2), by its own clock: the
-- adoption budget counts the sessions a host adopted in the last
-- vdibroker.AdoptionWindow by it. create_time is the logon time the host
-- reported (vdibroker.AdoptedCreateTime), up to a year back: counted by
-- it, a host's credential reporting its new users as logged on two hours
-- ago adopted 200 of them a heartbeat, not 200 an hour (R-SEC). A column
-- with a constant default is added without rewriting the table; the rows
-- adopted before (few: the index of 00020 finds them) take their
-- create_time, as they were counted.
ALTER TABLE user_sessions ADD COLUMN IF NOT EXISTS adopt_time BIGINT NOT NULL DEFAULT 0;
UPDATE user_sessions SET adopt_time = create_time WHERE adopted AND adopt_time = 0;
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname = 'user_sessions_adopted_by_host_time' AND c.relnamespace = current_schema()::regnamespace
               AND NOT i.indisvalid) THEN
        PERFORM set_config('lock_timeout', '10s', true);
        DROP INDEX user_sessions_adopted_by_host_time;
    END IF;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_sessions_adopted_by_host_time
    ON user_sessions (host_pool, session_host, adopt_time) WHERE adopted;
DROP INDEX CONCURRENTLY IF EXISTS user_sessions_adopted_by_host;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_sessions_adopted_by_host
    ON user_sessions (host_pool, session_host, create_time) WHERE adopted;
DROP INDEX CONCURRENTLY IF EXISTS user_sessions_adopted_by_host_time;
ALTER TABLE user_sessions DROP COLUMN IF EXISTS adopt_time;
