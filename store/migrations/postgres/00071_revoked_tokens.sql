-- +goose Up
-- API tokens an admin revoked (token delete), by the hash of their secret,
-- kept as long as history: a request with one is refused saying "token
-- revoked at ..." rather than "invalid token" (R-SEC). Only a caller
-- holding the whole secret finds its row, so it tells nobody else which
-- tokens exist. PruneHistory deletes the rows past the retention.
CREATE TABLE revoked_tokens (
    hash        TEXT COLLATE "C" PRIMARY KEY,
    id          TEXT COLLATE "C" NOT NULL,
    revoke_time BIGINT NOT NULL
);
CREATE INDEX revoked_tokens_by_time ON revoked_tokens (revoke_time);

-- +goose Down
DROP TABLE revoked_tokens;
