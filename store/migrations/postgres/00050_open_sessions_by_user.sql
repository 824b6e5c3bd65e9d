-- +goose NO TRANSACTION
-- CONCURRENTLY, outside a transaction, as 00019 and 00046: building it on
-- a large shared history must not block the replicas' writes. A failed
-- build leaves an INVALID index, dropped and built anew at the next start.
-- +goose Up
-- A user's open sessions in every pool (GET /api/v1/users/{user}/sessions,
-- the user portal's "my sessions", R-U3): one range of the folded name
-- (user_key, R-E5), whatever the pools' histories. The indexes of 00030
-- and 00046 lead with the pool.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname = 'user_sessions_open_by_user' AND c.relnamespace = current_schema()::regnamespace
               AND NOT i.indisvalid) THEN
        PERFORM set_config('lock_timeout', '10s', true);
        DROP INDEX user_sessions_open_by_user;
    END IF;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_sessions_open_by_user
    ON user_sessions (user_key, host_pool, id) WHERE state <> 'LoggedOff';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS user_sessions_open_by_user;
