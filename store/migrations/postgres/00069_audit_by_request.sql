-- +goose NO TRANSACTION
-- CONCURRENTLY, outside a transaction, as 00045: building it on a month
-- of audit entries must not block the replicas' writes. A failed build
-- leaves an INVALID index, dropped and built anew at the next start.
-- +goose Up
-- The audit entries of a request id (R-U7): a helpdesk given the
-- reference a portal user reads out beside a refusal asks for it
-- (audit list --request-id, ?requestId=), one or two entries among the
-- month of them a pod keeps (every portal sign-in and launch is one).
-- Without this index each asks by reading the whole trail.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname = 'audit_log_by_request' AND c.relnamespace = current_schema()::regnamespace
               AND NOT i.indisvalid) THEN
        PERFORM set_config('lock_timeout', '10s', true);
        DROP INDEX audit_log_by_request;
    END IF;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_log_by_request ON audit_log (request_id, seq);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS audit_log_by_request;
