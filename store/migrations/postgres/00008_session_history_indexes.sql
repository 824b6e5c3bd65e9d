-- +goose NO TRANSACTION
-- CONCURRENTLY, outside a transaction: building the indexes on a large
-- shared user_sessions table (a week of history) must not block the
-- replicas' connects meanwhile. If a build fails, PostgreSQL leaves an
-- INVALID index of that name; the migration, run again at the next start,
-- drops it and builds it anew.
-- +goose Up
-- Ended sessions (LoggedOff, kept for history, SPEC §1) by pool and user,
-- and by pool and host, in id order. The open sessions of a user are read
-- from the two partial indexes of R-C6 (user_sessions_one_per_pooled_user,
-- user_sessions_open_unpooled_by_user) and those of a host from
-- user_sessions_open_by_host_covering, none of which holds an ended session;
-- until now a listing with ?user= or ?sessionHost= (and every dry run, every
-- connect of a user the view knows) read the pool's sessions through
-- user_sessions_by_pool instead: every session the pool ever had. With
-- these two, ?state=LoggedOff with ?user= or ?sessionHost= is one range as
-- well, whatever the history. Both are partial: a connect's insert (a
-- Pending session) touches neither; a session enters them when it ends.
-- A build of these indexes that failed before left an INVALID index of its
-- name, which IF NOT EXISTS would keep (unused by queries): drop it first.
-- +goose StatementBegin
DO $$
DECLARE
    idx text;
BEGIN
    FOREACH idx IN ARRAY ARRAY['user_sessions_ended_by_user', 'user_sessions_ended_by_host', 'user_sessions_disconnected'] LOOP
        IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                   WHERE c.relname = idx AND c.relnamespace = current_schema()::regnamespace
                   AND NOT i.indisvalid) THEN
            -- A plain DROP locks the table: wait at most 10 s for it (then
            -- the migration fails and runs again at the next start) rather
            -- than queue every replica's writes behind a long transaction.
            PERFORM set_config('lock_timeout', '10s', true);
            EXECUTE format('DROP INDEX %I', idx);
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_sessions_ended_by_user
    ON user_sessions (host_pool, user_name, id) WHERE state = 'LoggedOff';
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_sessions_ended_by_host
    ON user_sessions (host_pool, session_host, id) WHERE state = 'LoggedOff';
-- Disconnected sessions by pool: every /metrics scrape counts each pool's
-- open sessions by state (CountOpenSessions). Pending and the total come
-- from host_counts; this small index gives the Disconnected ones, so a
-- scrape never reads the 250,000 open sessions of a full pod. Only a
-- disconnect or a reconnect changes it.
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_sessions_disconnected
    ON user_sessions (host_pool) WHERE state = 'Disconnected';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS user_sessions_disconnected;
DROP INDEX CONCURRENTLY IF EXISTS user_sessions_ended_by_host;
DROP INDEX CONCURRENTLY IF EXISTS user_sessions_ended_by_user;
