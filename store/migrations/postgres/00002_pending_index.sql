-- +goose Up
-- ExpirePending (R-S3) looks only at Pending sessions never seen by their
-- agent. Without this index it read every open session (250,000 with
-- 10,000 hosts of 25 sessions) every 5 s; the partial index holds only the
-- few sessions waiting for their user's logon.
CREATE INDEX user_sessions_pending
    ON user_sessions (host_pool, session_host, id) WHERE state = 'Pending' AND agent_session_id = '';

-- +goose Down
DROP INDEX user_sessions_pending;
