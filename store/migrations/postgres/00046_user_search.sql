-- +goose NO TRANSACTION
-- CONCURRENTLY, outside a transaction, as 00019: building them on a large
-- shared history must not block the replicas' writes. A failed build
-- leaves an INVALID index, dropped and built anew at the next start.
-- +goose Up
-- The console's user search (GET .../usersessions?userPrefix=): a pool's
-- sessions whose user name starts with a prefix, case-insensitively, in
-- order of the folded name, then id. The key is lower(user_name), the
-- database's own fold, so the prefix is folded by the same function, and
-- compared in byte order (COLLATE "C"), where the names with a prefix are
-- exactly one range whatever the database's collation; a search is one
-- range of the index, and its pages go on from the last row's (key, id).
-- Partial, as the by-user indexes: open sessions apart from the history.
-- +goose StatementBegin
DO $$
DECLARE
    ix text;
BEGIN
    FOREACH ix IN ARRAY ARRAY['user_sessions_open_by_user_key', 'user_sessions_ended_by_user_key'] LOOP
        IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                   WHERE c.relname = ix AND c.relnamespace = current_schema()::regnamespace
                   AND NOT i.indisvalid) THEN
            PERFORM set_config('lock_timeout', '10s', true);
            EXECUTE format('DROP INDEX %I', ix);
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_sessions_open_by_user_key
    ON user_sessions (host_pool, (lower(user_name) COLLATE "C"), id) WHERE state <> 'LoggedOff';
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_sessions_ended_by_user_key
    ON user_sessions (host_pool, (lower(user_name) COLLATE "C"), id) WHERE state = 'LoggedOff';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS user_sessions_ended_by_user_key;
DROP INDEX CONCURRENTLY IF EXISTS user_sessions_open_by_user_key;
