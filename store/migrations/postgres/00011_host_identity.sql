-- +goose Up
-- Host identity (R-SEC, R-S2).
-- adopted marks a session the broker did not place but a host reported
-- (R-S2): shown as such, and never preferred over a session the broker
-- placed (a rogue host cannot capture a user by reporting them).
ALTER TABLE user_sessions ADD COLUMN adopted BOOLEAN NOT NULL DEFAULT FALSE;
-- A registration token may be limited to max_hosts new hosts (0: no
-- limit); hosts counts the hosts it registered.
ALTER TABLE registration_tokens ADD COLUMN max_hosts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE registration_tokens ADD COLUMN hosts INTEGER NOT NULL DEFAULT 0;
-- A deleted host's name, so its agent cannot bring it back with a
-- registration token issued before the delete.
CREATE TABLE deleted_hosts (
    host_pool   TEXT COLLATE "C" NOT NULL,
    name        TEXT COLLATE "C" NOT NULL,
    delete_time BIGINT NOT NULL,
    PRIMARY KEY (host_pool, name)
);

-- +goose Down
DROP TABLE deleted_hosts;
ALTER TABLE registration_tokens DROP COLUMN hosts;
ALTER TABLE registration_tokens DROP COLUMN max_hosts;
ALTER TABLE user_sessions DROP COLUMN adopted;
