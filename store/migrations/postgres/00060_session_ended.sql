-- +goose Up
-- ended is state = 'LoggedOff', in a column of its own that only the end
-- of a session writes (see the SQLite migration of the same number: there
-- the open and ended partial indexes are now conditioned on it, so a
-- logon no longer rewrites them). PostgreSQL keeps its indexes on state:
-- an UPDATE here writes a new entry in every index of a row it cannot
-- update in place, whatever the indexes' conditions, so it would gain
-- nothing. The store's queries of open and ended sessions name state
-- here (store.openSQL, rewritten by store's dialect.q), its writes are
-- the same on both engines, and the constraint checks that every one of
-- them keeps the two in step.
ALTER TABLE user_sessions ADD COLUMN ended BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE user_sessions SET ended = TRUE WHERE state = 'LoggedOff';
ALTER TABLE user_sessions ADD CONSTRAINT user_sessions_ended_is_logged_off CHECK (ended = (state = 'LoggedOff'));

-- +goose Down
ALTER TABLE user_sessions DROP CONSTRAINT user_sessions_ended_is_logged_off;
ALTER TABLE user_sessions DROP COLUMN ended;
