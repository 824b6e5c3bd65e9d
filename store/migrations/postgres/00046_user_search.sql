-- +goose NO TRANSACTION
-- CONCURRENTLY, outside a transaction, as 00019: building it on a large
-- shared history must not block the replicas' writes. A failed build
-- leaves an INVALID index, dropped and built anew at the next start.
-- +goose Up
-- The console's user search (GET .../usersessions?userPrefix=): a pool's
-- open sessions whose user name starts with a prefix, case-insensitively,
-- in order of the folded name (user_key, R-E5, COLLATE "C": the names with
-- a prefix are exactly one range whatever the database's collation), then
-- id; a search is one range of the index, and its pages go on from the
-- last row's (key, id). Ended sessions are searched in
-- user_sessions_ended_by_user (00030), which is the same key.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname = 'user_sessions_open_by_user_key' AND c.relnamespace = current_schema()::regnamespace
               AND NOT i.indisvalid) THEN
        PERFORM set_config('lock_timeout', '10s', true);
        DROP INDEX user_sessions_open_by_user_key;
    END IF;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_sessions_open_by_user_key
    ON user_sessions (host_pool, user_key, id) WHERE state <> 'LoggedOff';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS user_sessions_open_by_user_key;
