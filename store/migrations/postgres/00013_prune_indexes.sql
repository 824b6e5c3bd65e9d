-- +goose NO TRANSACTION
-- CONCURRENTLY, outside a transaction, as 00008: building them on a large
-- shared history must not block the replicas' writes. A failed build
-- leaves an INVALID index, dropped and built anew at the next start.
-- +goose Up
-- Pruning (serve --retention): ended sessions by the time they
-- ended, and commands by creation time, so the hourly prune deletes its
-- batches by index instead of reading the whole history each time.
-- +goose StatementBegin
DO $$
DECLARE
    idx text;
BEGIN
    FOREACH idx IN ARRAY ARRAY['user_sessions_ended_by_time', 'commands_by_time'] LOOP
        IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                   WHERE c.relname = idx AND c.relnamespace = current_schema()::regnamespace
                   AND NOT i.indisvalid) THEN
            PERFORM set_config('lock_timeout', '10s', true);
            EXECUTE format('DROP INDEX %I', idx);
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_sessions_ended_by_time
    ON user_sessions (state_time) WHERE state = 'LoggedOff';
CREATE INDEX CONCURRENTLY IF NOT EXISTS commands_by_time
    ON commands (create_time);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS commands_by_time;
DROP INDEX CONCURRENTLY IF EXISTS user_sessions_ended_by_time;
