-- +goose Up
-- The user portal's launches (R-U7), shared by every replica: a browser
-- behind a load balancer may poll a launch's status, and fetch its file,
-- on a replica other than the one that made it. The launch's id (in its
-- page's URL) is not stored: id_hash is its SHA-256, and sealed is the
-- .rdp file encrypted with a key derived from it. owner is the SHA-256 of
-- the sign-in's cookie. Bounded per owner and in all when one is made,
-- which deletes the expired first.
CREATE TABLE portal_launches (
    id_hash     TEXT COLLATE "C" PRIMARY KEY,
    owner       TEXT COLLATE "C" NOT NULL,
    name        TEXT NOT NULL,
    state       TEXT COLLATE "C" NOT NULL,
    starting    BOOLEAN NOT NULL DEFAULT FALSE,
    host        TEXT NOT NULL DEFAULT '',
    until_time  BIGINT NOT NULL DEFAULT 0,
    sealed      BYTEA NOT NULL DEFAULT '\x',
    message     TEXT NOT NULL DEFAULT '',
    create_time BIGINT NOT NULL,
    expire_time BIGINT NOT NULL
);
CREATE INDEX portal_launches_by_owner ON portal_launches (owner, expire_time);
CREATE INDEX portal_launches_by_expiry ON portal_launches (expire_time);

-- +goose Down
DROP TABLE portal_launches;
