-- +goose NO TRANSACTION
-- CONCURRENTLY, outside a transaction, as 00069 and 00070: building it on
-- a month of audit entries must not block the replicas' writes. A failed
-- build leaves an INVALID index, dropped and built anew at the next start.
-- +goose Up
-- A token's subject is matched in any case of its ASCII letters (R-E5),
-- as on SQLite, whose lower() folds ASCII only. PostgreSQL's lower()
-- folds by the database's ctype (Ö to ö in a UTF-8 one), so 00070's
-- audit_log_by_principal_name made "östen" find ÖSTEN and "Östen" miss
-- it; lower() in the "C" collation folds ASCII only. listAuditQuery asks
-- for lower(principal_name COLLATE "C") (the dialect's
-- principalNameLower); the new index is built before the old is dropped,
-- so no listing walks the whole trail meanwhile.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname = 'audit_log_by_principal_ascii' AND c.relnamespace = current_schema()::regnamespace
               AND NOT i.indisvalid) THEN
        PERFORM set_config('lock_timeout', '10s', true);
        DROP INDEX audit_log_by_principal_ascii;
    END IF;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_log_by_principal_ascii ON audit_log (lower(principal_name COLLATE "C"), seq);
DROP INDEX CONCURRENTLY IF EXISTS audit_log_by_principal_name;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_log_by_principal_name ON audit_log (lower(principal_name), seq);
DROP INDEX CONCURRENTLY IF EXISTS audit_log_by_principal_ascii;
