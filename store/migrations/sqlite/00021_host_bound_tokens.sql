-- +goose Up
-- Safe by default (R-SEC): a registration token may be issued for one
-- session host (session_host; '' = any name in its pool), and a personal
-- desktop an admin created (PUT) that never registered awaits such a
-- token: the first holder of any token of its pool cannot become it, and
-- its users' desktop. Hosts that exist when this runs keep the old rule.
ALTER TABLE registration_tokens ADD COLUMN session_host TEXT NOT NULL DEFAULT '';
ALTER TABLE session_hosts ADD COLUMN awaits_host_token BOOLEAN NOT NULL DEFAULT FALSE;

-- +goose Down
ALTER TABLE session_hosts DROP COLUMN awaits_host_token;
ALTER TABLE registration_tokens DROP COLUMN session_host;
