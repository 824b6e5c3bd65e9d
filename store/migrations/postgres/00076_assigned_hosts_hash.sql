-- +goose NO TRANSACTION
-- +goose Up
-- session_hosts_assigned (00006) was a B-tree over (host_pool,
-- assigned_users): a B-tree entry holds its key, at most about 2.7 kB, so
-- a host whose assigned users' list is longer (a MultiplePersistent host
-- of many users, R-PE3) could not be written at all. A hash index of the
-- same name holds a 4-byte hash of the list whatever its length, and
-- answers the one question it is for: does the user already have a host
-- (assigned_users equal to just that user, R-PE1), the pool then checked
-- on the rows found. Built CONCURRENTLY, outside a transaction, as 00006:
-- the B-tree, or an INVALID index a failed build left, is dropped first
-- (waiting at most 10 s for the table's lock; else the migration fails and
-- runs again at the next start).
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
               WHERE c.relname = 'session_hosts_assigned' AND c.relnamespace = current_schema()::regnamespace
               AND (NOT i.indisvalid OR a.amname <> 'hash')) THEN
        PERFORM set_config('lock_timeout', '10s', true);
        DROP INDEX session_hosts_assigned;
    END IF;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS session_hosts_assigned
    ON session_hosts USING hash (assigned_users) WHERE assigned_users <> '[]';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS session_hosts_assigned;
CREATE INDEX CONCURRENTLY IF NOT EXISTS session_hosts_assigned
    ON session_hosts (host_pool, assigned_users) WHERE assigned_users <> '[]';
