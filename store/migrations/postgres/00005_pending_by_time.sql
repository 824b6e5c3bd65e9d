-- +goose NO TRANSACTION
-- CONCURRENTLY, outside a transaction: building the index on a large shared
-- user_sessions table must not block the replicas' connects meanwhile. If a
-- build fails, PostgreSQL may leave an INVALID index of that name: drop it
-- and start the broker again.
-- +goose Up
-- Pending sessions not yet seen by an agent, by pool and creation order
-- (their state_time is their create time). The maintenance loop reads only
-- the expired ones of each pool (R-S3), a range at the front; and each new
-- session is added at the end of its pool's range, so a group commit of many
-- connects changes one page of this index, where the index by host of
-- migration 00002 changed one page per host placed on.
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_sessions_pending_by_time
    ON user_sessions (host_pool, state_time) WHERE state = 'Pending' AND agent_session_id = '';
DROP INDEX CONCURRENTLY IF EXISTS user_sessions_pending;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS user_sessions_pending
    ON user_sessions (host_pool, session_host, id) WHERE state = 'Pending' AND agent_session_id = '';
DROP INDEX CONCURRENTLY IF EXISTS user_sessions_pending_by_time;
