-- +goose Up
-- Pruning (serve --retention): ended sessions by the time they
-- ended, and commands by creation time, so the hourly prune deletes its
-- batches by index instead of reading the whole history each time.
CREATE INDEX user_sessions_ended_by_time ON user_sessions (state_time) WHERE state = 'LoggedOff';
CREATE INDEX commands_by_time ON commands (create_time);

-- +goose Down
DROP INDEX commands_by_time;
DROP INDEX user_sessions_ended_by_time;
