-- +goose NO TRANSACTION
-- CONCURRENTLY, outside a transaction, as 00008: building it on a large
-- shared history must not block the replicas' writes. A failed build
-- leaves an INVALID index, dropped and built anew at the next start.
-- +goose Up
-- A pool's open sessions in id order (ids sort by creation time). The
-- broker's views catch up with the sessions opened since their last look
-- (broker views.catchUpUsers: id > cursor, open only, 20,000 at a time,
-- every maintenance tick), so that during a store outage a replica can
-- answer the reconnects of users placed elsewhere or before a restart.
-- Without this index that read walks user_sessions_by_pool, or all of the
-- pool's open sessions and sorts them, on every tick; after a restart on a
-- week of history it read the history rows first (seen in bench pod). Partial:
-- history rows are not in it; a connect's insert adds one entry at the end
-- of its pool's range.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname = 'user_sessions_open_by_pool' AND c.relnamespace = current_schema()::regnamespace
               AND NOT i.indisvalid) THEN
        PERFORM set_config('lock_timeout', '10s', true);
        DROP INDEX user_sessions_open_by_pool;
    END IF;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_sessions_open_by_pool
    ON user_sessions (host_pool, id) WHERE state <> 'LoggedOff';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS user_sessions_open_by_pool;
