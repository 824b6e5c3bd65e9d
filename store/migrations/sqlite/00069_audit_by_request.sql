-- +goose Up
-- The audit entries of a request id (R-U7): a helpdesk given the
-- reference a portal user reads out beside a refusal asks for it
-- (audit list --request-id, ?requestId=), one or two entries among the
-- month of them a pod keeps (every portal sign-in and launch is one).
-- Without this index each asks by reading the whole trail.
CREATE INDEX audit_log_by_request ON audit_log (request_id, seq);

-- +goose Down
DROP INDEX audit_log_by_request;
