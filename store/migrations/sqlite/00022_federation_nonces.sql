-- +goose Up
-- The nonces of verified pod-to-pod calls (R-G5), where every replica of
-- the pod sees them: a call replayed on another replica is refused as on
-- the one that took it. A nonce lives as long as a signature is fresh
-- (two minutes); each call deletes the expired ones. federation_nonce_minutes
-- counts the nonces of each minute, so that no more than a bound are kept
-- however fast signed calls come.
CREATE TABLE federation_nonces (
    nonce       TEXT PRIMARY KEY,
    expire_time BIGINT NOT NULL
);
CREATE INDEX federation_nonces_by_expiry ON federation_nonces (expire_time);
CREATE TABLE federation_nonce_minutes (
    minute BIGINT PRIMARY KEY,
    n      INTEGER NOT NULL
);

-- +goose Down
DROP TABLE federation_nonce_minutes;
DROP TABLE federation_nonces;
