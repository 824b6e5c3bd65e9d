-- +goose Up
-- The console's user search (GET .../usersessions?userPrefix=): a pool's
-- open sessions whose user name starts with a prefix, case-insensitively,
-- in order of the folded name (user_key, R-E5), then id; a search is one
-- range of the index, and its pages go on from the last row's (key, id).
-- Ended sessions are searched in user_sessions_ended_by_user (00030),
-- which is the same key.
CREATE INDEX user_sessions_open_by_user_key
    ON user_sessions (host_pool, user_key, id) WHERE state <> 'LoggedOff';

-- +goose Down
DROP INDEX user_sessions_open_by_user_key;
