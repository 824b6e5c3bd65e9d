-- +goose NO TRANSACTION
-- +goose Up
-- session_hosts_assigned (00006) was a B-tree over (host_pool,
-- assigned_users): a B-tree entry holds its key, at most about 2.7 kB, so
-- a host whose assigned users' list is longer (a MultiplePersistent host
-- of many users, R-PE3) could not be written at all. A hash index holds a
-- 4-byte hash of the list whatever its length, and answers the one
-- question the index is for: does the user already have a host
-- (assigned_users equal to just that user, R-PE1), the pool then checked
-- on the rows found. Built CONCURRENTLY, outside a transaction, before
-- the B-tree is dropped CONCURRENTLY, so neither step locks out the
-- replicas' writes meanwhile. An INVALID index a failed build left is
-- dropped first (as in 00006).
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname = 'session_hosts_assigned_hash' AND c.relnamespace = current_schema()::regnamespace
               AND NOT i.indisvalid) THEN
        PERFORM set_config('lock_timeout', '10s', true);
        DROP INDEX session_hosts_assigned_hash;
    END IF;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS session_hosts_assigned_hash
    ON session_hosts USING hash (assigned_users) WHERE assigned_users <> '[]';
DROP INDEX CONCURRENTLY IF EXISTS session_hosts_assigned;

-- +goose Down
-- A B-tree build that failed (a list too long for it) left an INVALID
-- index, which IF NOT EXISTS would keep: dropped first, so that the build
-- is tried again, and fails again, rather than leave no index.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname = 'session_hosts_assigned' AND c.relnamespace = current_schema()::regnamespace
               AND NOT i.indisvalid) THEN
        PERFORM set_config('lock_timeout', '10s', true);
        DROP INDEX session_hosts_assigned;
    END IF;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS session_hosts_assigned
    ON session_hosts (host_pool, assigned_users) WHERE assigned_users <> '[]';
DROP INDEX CONCURRENTLY IF EXISTS session_hosts_assigned_hash;
