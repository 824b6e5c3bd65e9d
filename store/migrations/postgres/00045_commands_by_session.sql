-- +goose NO TRANSACTION
-- CONCURRENTLY, outside a transaction, as 00019: building it on a large
-- commands table must not block the replicas' writes. A failed build
-- leaves an INVALID index, dropped and built anew at the next start.
-- +goose Up
-- A session's logoff commands. A heartbeat that no longer reports a
-- session asks whether its agent was given a logoff (store loggedOff), so
-- the session ends LoggedOffByAdmin or DisconnectedTimeout rather than
-- NotReported; R-S5 asks when the last logoff was (lastLogoffs). Without
-- this index each asks by reading every command the broker ever queued.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname = 'commands_by_session' AND c.relnamespace = current_schema()::regnamespace
               AND NOT i.indisvalid) THEN
        PERFORM set_config('lock_timeout', '10s', true);
        DROP INDEX commands_by_session;
    END IF;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS commands_by_session ON commands (session_id, type, state);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS commands_by_session;
