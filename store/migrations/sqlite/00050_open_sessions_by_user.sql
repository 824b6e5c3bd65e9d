-- +goose Up
-- A user's open sessions in every pool (GET /api/v1/users/{user}/sessions,
-- the user portal's "my sessions", R-U3): one range of the folded name
-- (user_key, R-E5), whatever the pools' histories. The indexes of 00030
-- and 00046 lead with the pool.
CREATE INDEX user_sessions_open_by_user
    ON user_sessions (user_key, host_pool, id) WHERE state <> 'LoggedOff';

-- +goose Down
DROP INDEX user_sessions_open_by_user;
