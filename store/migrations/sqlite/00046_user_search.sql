-- +goose Up
-- The console's user search (GET .../usersessions?userPrefix=): a pool's
-- sessions whose user name starts with a prefix, case-insensitively, in
-- order of the folded name, then id. The key is lower(user_name), the
-- database's own fold (ASCII on SQLite), so the prefix is folded by the
-- same function; a search is one range of the index, and its pages go on
-- from the last row's (key, id). Partial, as the by-user indexes: open
-- sessions apart from the history.
CREATE INDEX user_sessions_open_by_user_key
    ON user_sessions (host_pool, lower(user_name), id) WHERE state <> 'LoggedOff';
CREATE INDEX user_sessions_ended_by_user_key
    ON user_sessions (host_pool, lower(user_name), id) WHERE state = 'LoggedOff';

-- +goose Down
DROP INDEX user_sessions_ended_by_user_key;
DROP INDEX user_sessions_open_by_user_key;
