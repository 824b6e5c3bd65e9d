-- +goose NO TRANSACTION
-- CONCURRENTLY, outside a transaction, as 00069: building them on a month
-- of audit entries must not block the replicas' writes. A failed build
-- leaves an INVALID index, dropped and built anew at the next start.
-- +goose Up
-- The audit entries of a principal (R-E5): audit list --principal
-- (?principal=) asks for a token id or OIDC subject exactly, or a token's
-- subject in any ASCII case, among the month of entries a pod keeps.
-- listAuditQuery reads each in seq order up to the page: the id in the
-- first index, the subject in the second, on lower(principal_name) as the
-- query writes it. Without them each asks by reading the whole trail.
-- +goose StatementBegin
DO $$
DECLARE
    idx text;
BEGIN
    FOREACH idx IN ARRAY ARRAY['audit_log_by_principal_id', 'audit_log_by_principal_name'] LOOP
        IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                   WHERE c.relname = idx AND c.relnamespace = current_schema()::regnamespace
                   AND NOT i.indisvalid) THEN
            PERFORM set_config('lock_timeout', '10s', true);
            EXECUTE format('DROP INDEX %I', idx);
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_log_by_principal_id ON audit_log (principal_id, seq);
CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_log_by_principal_name ON audit_log (lower(principal_name), seq);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS audit_log_by_principal_name;
DROP INDEX CONCURRENTLY IF EXISTS audit_log_by_principal_id;
