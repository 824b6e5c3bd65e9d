-- +goose Up
-- A new automatic assignment (R-PE1) first asks whether the user already
-- has a host in the pool, inside the committing transaction, so a server
-- whose view is stale cannot give the user a second one (R-D3). Hosts with
-- no assigned user (every pooled host) are outside this partial index and
-- do not pay for it.
CREATE INDEX session_hosts_assigned
    ON session_hosts (host_pool, assigned_users) WHERE assigned_users <> '[]';

-- +goose Down
DROP INDEX session_hosts_assigned;
