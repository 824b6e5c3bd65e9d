-- +goose Up
-- A session's logoff commands. A heartbeat that no longer reports a
-- session asks whether its agent was given a logoff (store loggedOff), so
-- the session ends LoggedOffByAdmin or DisconnectedTimeout rather than
-- NotReported; R-S5 asks when the last logoff was (lastLogoffs). Without
-- this index each asks by reading every command the broker ever queued.
CREATE INDEX commands_by_session ON commands (session_id, type, state);

-- +goose Down
DROP INDEX commands_by_session;
