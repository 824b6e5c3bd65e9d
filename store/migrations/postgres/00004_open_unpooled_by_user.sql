-- +goose NO TRANSACTION
-- CONCURRENTLY, outside a transaction: building the index on a large shared
-- user_sessions table must not block the replicas' connects meanwhile. If a
-- build fails, PostgreSQL leaves an INVALID index of that name; the
-- migration, run again at the next start, drops it and builds it anew.
-- +goose Up
-- Every pooled placement asks whether the user already has an open session
-- in the pool (R-C6), adopted sessions included (R-S2, R-C1), and adopted
-- sessions are not "pooled". The unique index of migration 00001 answers
-- for pooled sessions; this one answers for the others, so the question
-- never reads every session of the pool. Pooled sessions, the bulk of all
-- inserts, are outside this partial index and do not pay for it.
-- A build of this index that failed before left an INVALID index of its
-- name, which IF NOT EXISTS would keep (unused by queries): drop it first.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname = 'user_sessions_open_unpooled_by_user' AND c.relnamespace = current_schema()::regnamespace
               AND NOT i.indisvalid) THEN
        -- A plain DROP locks the table: wait at most 10 s for it (then the
        -- migration fails and runs again at the next start) rather than
        -- queue every replica's writes behind a long transaction.
        PERFORM set_config('lock_timeout', '10s', true);
        DROP INDEX user_sessions_open_unpooled_by_user;
    END IF;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_sessions_open_unpooled_by_user
    ON user_sessions (host_pool, user_name) WHERE NOT pooled AND state <> 'LoggedOff';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS user_sessions_open_unpooled_by_user;
