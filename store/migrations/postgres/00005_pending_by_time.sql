-- +goose NO TRANSACTION
-- CONCURRENTLY, outside a transaction: building the index on a large shared
-- user_sessions table must not block the replicas' connects meanwhile. If a
-- build fails, PostgreSQL leaves an INVALID index of that name; the
-- migration, run again at the next start, drops it and builds it anew.
-- +goose Up
-- Pending sessions not yet seen by an agent, by pool and creation order
-- (their state_time is their create time). The maintenance loop reads only
-- the expired ones of each pool (R-S3), a range at the front; and each new
-- session is added at the end of its pool's range, so a group commit of many
-- connects changes one page of this index, where the index by host of
-- migration 00002 changed one page per host placed on.
-- A build of this index that failed before left an INVALID index of its
-- name, which IF NOT EXISTS would keep (unused by queries): drop it first.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname = 'user_sessions_pending_by_time' AND c.relnamespace = current_schema()::regnamespace
               AND NOT i.indisvalid) THEN
        -- A plain DROP locks the table: wait at most 10 s for it (then the
        -- migration fails and runs again at the next start) rather than
        -- queue every replica's writes behind a long transaction.
        PERFORM set_config('lock_timeout', '10s', true);
        DROP INDEX user_sessions_pending_by_time;
    END IF;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_sessions_pending_by_time
    ON user_sessions (host_pool, state_time) WHERE state = 'Pending' AND agent_session_id = '';
DROP INDEX CONCURRENTLY IF EXISTS user_sessions_pending;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_sessions_pending
    ON user_sessions (host_pool, session_host, id) WHERE state = 'Pending' AND agent_session_id = '';
DROP INDEX CONCURRENTLY IF EXISTS user_sessions_pending_by_time;
