-- +goose NO TRANSACTION
-- CONCURRENTLY, outside a transaction, so an upgrade does not block the
-- replicas meanwhile. If a build fails, PostgreSQL leaves an INVALID index
-- of that name; the migration, run again at the next start, drops it and
-- builds it anew.
-- +goose Up
-- A new automatic assignment (R-PE1) first asks whether the user already
-- has a host in the pool, inside the committing transaction, so a replica
-- whose view is stale cannot give the user a second one (R-D3). Hosts with
-- no assigned user (every pooled host) are outside this partial index and
-- do not pay for it.
-- A build of this index that failed before left an INVALID index of its
-- name, which IF NOT EXISTS would keep (unused by queries): drop it first.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname = 'session_hosts_assigned' AND c.relnamespace = current_schema()::regnamespace
               AND NOT i.indisvalid) THEN
        -- A plain DROP locks the table: wait at most 10 s for it (then the
        -- migration fails and runs again at the next start) rather than
        -- queue every replica's writes behind a long transaction.
        PERFORM set_config('lock_timeout', '10s', true);
        DROP INDEX session_hosts_assigned;
    END IF;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS session_hosts_assigned
    ON session_hosts (host_pool, assigned_users) WHERE assigned_users <> '[]';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS session_hosts_assigned;
