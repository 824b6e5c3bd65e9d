-- +goose Up
-- Every heartbeat reads its host's open sessions in creation order
-- (reconcile, R-S2). With this index that is one range of the index, with
-- no table read per session and no sort; it replaces the narrower index of
-- open sessions by host, whose queries use its first two columns.
CREATE INDEX user_sessions_open_by_host_covering
    ON user_sessions (host_pool, session_host, create_time, id, user_name, state, agent_session_id, state_time, logoff_queued)
    WHERE state <> 'LoggedOff';
DROP INDEX user_sessions_open_by_host;

-- +goose Down
CREATE INDEX user_sessions_open_by_host
    ON user_sessions (host_pool, session_host) WHERE state <> 'LoggedOff';
DROP INDEX user_sessions_open_by_host_covering;
