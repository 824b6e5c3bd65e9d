-- +goose Up
-- Whether a session host can run RemoteApps, as its agent reports at
-- registration and in its heartbeats (R-E12): 'Yes', 'No', or 'Unknown'
-- for a host whose agent never said (an agent older than the report), which
-- application connects still use, as before.
ALTER TABLE session_hosts ADD COLUMN remote_apps TEXT NOT NULL DEFAULT 'Unknown';

-- +goose Down
ALTER TABLE session_hosts DROP COLUMN remote_apps;
