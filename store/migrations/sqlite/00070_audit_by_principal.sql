-- +goose Up
-- The audit entries of a principal (R-E5): audit list --principal
-- (?principal=) asks for a token id or OIDC subject exactly, or a token's
-- subject in any ASCII case, among the month of entries a pod keeps.
-- listAuditQuery reads each in seq order up to the page: the id in the
-- first index, the subject in the second, on lower(principal_name) as the
-- query writes it. Without them each asks by reading the whole trail.
CREATE INDEX audit_log_by_principal_id ON audit_log (principal_id, seq);
CREATE INDEX audit_log_by_principal_name ON audit_log (lower(principal_name), seq);

-- +goose Down
DROP INDEX audit_log_by_principal_name;
DROP INDEX audit_log_by_principal_id;
