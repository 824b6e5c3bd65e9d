-- +goose Up
-- ended is state = 'LoggedOff', in a column of its own that only the end
-- of a session writes. SQLite deletes and inserts again a row's entry in
-- every partial index whose condition names a column the UPDATE sets, even
-- when the row stays in it: with the open and ended indexes conditioned on
-- state, each logon (Pending -> Active) and each disconnection rewrote
-- eleven index entries, five of them on a random page of a user's index.
-- Conditioned on ended, these nine indexes are left alone until the
-- session ends: a logon costs half as much. R-C6's unique index (R-D3)
-- is one of them, on open sessions as before.
-- Queries name both conditions (store.openSQL, store.endedSQL); on
-- PostgreSQL, which keeps its indexes on state (an UPDATE there writes
-- every index of a row it cannot update in place anyway), they are
-- rewritten to state alone, and a constraint checks that the two agree.
ALTER TABLE user_sessions ADD COLUMN ended BOOLEAN NOT NULL DEFAULT FALSE;
DROP INDEX user_sessions_open_by_host_covering;
DROP INDEX user_sessions_ended_by_host;
DROP INDEX user_sessions_ended_by_time;
DROP INDEX user_sessions_open_by_pool;
DROP INDEX user_sessions_one_per_pooled_user;
DROP INDEX user_sessions_open_unpooled_by_user;
DROP INDEX user_sessions_ended_by_user;
DROP INDEX user_sessions_open_by_user_key;
DROP INDEX user_sessions_open_by_user;
UPDATE user_sessions SET ended = TRUE WHERE state = 'LoggedOff';
-- ended is in the covering index too, though always false there: the
-- queries name it (store.openSQL), and an index without it covers none.
CREATE INDEX user_sessions_open_by_host_covering
    ON user_sessions (host_pool, session_host, create_time, id, user_name, state, agent_session_id, state_time, logoff_queued, ended) WHERE NOT ended;
CREATE INDEX user_sessions_ended_by_host
    ON user_sessions (host_pool, session_host, id) WHERE ended;
CREATE INDEX user_sessions_ended_by_time
    ON user_sessions (state_time) WHERE ended;
CREATE INDEX user_sessions_open_by_pool
    ON user_sessions (host_pool, id) WHERE NOT ended;
CREATE UNIQUE INDEX user_sessions_one_per_pooled_user
    ON user_sessions (host_pool, user_key) WHERE pooled AND NOT ended;
CREATE INDEX user_sessions_open_unpooled_by_user
    ON user_sessions (host_pool, user_key) WHERE NOT pooled AND NOT ended;
CREATE INDEX user_sessions_ended_by_user
    ON user_sessions (host_pool, user_key, id) WHERE ended;
CREATE INDEX user_sessions_open_by_user_key
    ON user_sessions (host_pool, user_key, id) WHERE NOT ended;
CREATE INDEX user_sessions_open_by_user
    ON user_sessions (user_key, host_pool, id) WHERE NOT ended;

-- +goose Down
DROP INDEX user_sessions_open_by_host_covering;
DROP INDEX user_sessions_ended_by_host;
DROP INDEX user_sessions_ended_by_time;
DROP INDEX user_sessions_open_by_pool;
DROP INDEX user_sessions_one_per_pooled_user;
DROP INDEX user_sessions_open_unpooled_by_user;
DROP INDEX user_sessions_ended_by_user;
DROP INDEX user_sessions_open_by_user_key;
DROP INDEX user_sessions_open_by_user;
CREATE INDEX user_sessions_open_by_host_covering
    ON user_sessions (host_pool, session_host, create_time, id, user_name, state, agent_session_id, state_time, logoff_queued) WHERE state <> 'LoggedOff';
CREATE INDEX user_sessions_ended_by_host
    ON user_sessions (host_pool, session_host, id) WHERE state = 'LoggedOff';
CREATE INDEX user_sessions_ended_by_time
    ON user_sessions (state_time) WHERE state = 'LoggedOff';
CREATE INDEX user_sessions_open_by_pool
    ON user_sessions (host_pool, id) WHERE state <> 'LoggedOff';
CREATE UNIQUE INDEX user_sessions_one_per_pooled_user
    ON user_sessions (host_pool, user_key) WHERE pooled AND state <> 'LoggedOff';
CREATE INDEX user_sessions_open_unpooled_by_user
    ON user_sessions (host_pool, user_key) WHERE NOT pooled AND state <> 'LoggedOff';
CREATE INDEX user_sessions_ended_by_user
    ON user_sessions (host_pool, user_key, id) WHERE state = 'LoggedOff';
CREATE INDEX user_sessions_open_by_user_key
    ON user_sessions (host_pool, user_key, id) WHERE state <> 'LoggedOff';
CREATE INDEX user_sessions_open_by_user
    ON user_sessions (user_key, host_pool, id) WHERE state <> 'LoggedOff';
ALTER TABLE user_sessions DROP COLUMN ended;
