-- +goose Up
-- Nothing on SQLite: its lower() folds ASCII letters only, so 00070's
-- audit_log_by_principal_name already holds a subject as R-E5 matches it.
-- PostgreSQL's 00072 builds its index on lower(principal_name COLLATE
-- "C") for the same folding; the versions of both engines stay alike.
SELECT 1;

-- +goose Down
SELECT 1;
