-- +goose NO TRANSACTION
-- CONCURRENTLY, outside a transaction, as 00008: building it on a large
-- shared history must not block the replicas' writes. A failed build
-- leaves an INVALID index, dropped and built anew at the next start.
-- +goose Up
-- A host's adoptions by time (R-S2): reconciliation counts the sessions a
-- host adopted in the last vdibroker.AdoptionWindow, ended ones included,
-- before it adopts more (the adoption budget), so that one host's
-- credential cannot fill the store by reporting new users heartbeat after
-- heartbeat. Partial: only adopted rows, which are few.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname = 'user_sessions_adopted_by_host' AND c.relnamespace = current_schema()::regnamespace
               AND NOT i.indisvalid) THEN
        PERFORM set_config('lock_timeout', '10s', true);
        DROP INDEX user_sessions_adopted_by_host;
    END IF;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_sessions_adopted_by_host
    ON user_sessions (host_pool, session_host, create_time) WHERE adopted;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS user_sessions_adopted_by_host;
