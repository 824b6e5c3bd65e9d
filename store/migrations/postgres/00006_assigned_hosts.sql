-- +goose NO TRANSACTION
-- CONCURRENTLY, outside a transaction, so an upgrade does not block the
-- replicas meanwhile. If a build fails, PostgreSQL may leave an INVALID
-- index of that name: drop it and start the broker again.
-- +goose Up
-- A new automatic assignment (R-PE1) first asks whether the user already
-- has a host in the pool, inside the committing transaction, so a replica
-- whose view is stale cannot give the user a second one (R-D3). Hosts with
-- no assigned user (every pooled host) are outside this partial index and
-- do not pay for it.
CREATE INDEX CONCURRENTLY IF NOT EXISTS session_hosts_assigned
    ON session_hosts (host_pool, assigned_users) WHERE assigned_users <> '[]';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS session_hosts_assigned;
