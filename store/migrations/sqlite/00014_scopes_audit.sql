-- +goose Up
-- Host-pool scopes. An API token may be scoped to host pools (a JSON list; '[]' is
-- every pool, as before).
ALTER TABLE tokens ADD COLUMN host_pools TEXT NOT NULL DEFAULT '[]';

-- The audit trail: one row per change or security event, written in the
-- transaction of the change it records (or alone, for a refusal). Rows are
-- never updated; only the retention prune deletes them (by time).
CREATE TABLE audit_log (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    time            INTEGER NOT NULL,
    principal_kind  TEXT NOT NULL, -- admin, token, oidc, host, registration, anonymous
    principal_id    TEXT NOT NULL, -- token id, OIDC subject, host name...
    principal_name  TEXT NOT NULL, -- the token's subject
    principal_role  TEXT NOT NULL,
    principal_scope TEXT NOT NULL, -- JSON list of host pools; '[]' = all
    remote_addr     TEXT NOT NULL,
    request_id      TEXT NOT NULL,
    action          TEXT NOT NULL,
    target          TEXT NOT NULL,
    host_pool       TEXT NOT NULL, -- the target's pool ('' for none)
    outcome         TEXT NOT NULL, -- ok or refused
    error           TEXT NOT NULL,
    before          TEXT NOT NULL, -- JSON, 'null' when none
    after           TEXT NOT NULL
);
CREATE INDEX audit_log_by_time ON audit_log (time);
CREATE INDEX audit_log_by_target ON audit_log (target, seq);

-- +goose StatementBegin
CREATE TRIGGER audit_log_append_only BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER audit_log_append_only;
DROP TABLE audit_log;
ALTER TABLE tokens DROP COLUMN host_pools;
