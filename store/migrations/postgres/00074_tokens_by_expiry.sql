-- +goose Up
-- PruneHistory deletes expired API tokens and registration tokens in
-- batches of 5,000 rows, each its own short write, as the rest of the
-- history: each batch finds the expired rows at the front of these
-- indexes, not by reading the whole table again. A token without expiry
-- (expire_time NULL) is never pruned.
CREATE INDEX tokens_by_expiry ON tokens (expire_time);
CREATE INDEX registration_tokens_by_expiry ON registration_tokens (expire_time);

-- +goose Down
DROP INDEX registration_tokens_by_expiry;
DROP INDEX tokens_by_expiry;
