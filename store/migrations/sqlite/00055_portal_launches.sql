-- +goose Up
-- The user portal's launches (R-U7), shared by every replica: a browser
-- behind a load balancer may poll a launch's status, and fetch its file,
-- on a replica other than the one that made it. The launch's id (in its
-- page's URL) is not stored: id_hash is its SHA-256, and sealed is the
-- .rdp file encrypted with a key derived from it. owner is the SHA-256 of
-- the sign-in's cookie. Bounded per owner and in all when one is made,
-- which deletes the expired first.
CREATE TABLE portal_launches (
    id_hash     TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    name        TEXT NOT NULL,
    state       TEXT NOT NULL,
    starting    INTEGER NOT NULL DEFAULT 0,
    host        TEXT NOT NULL DEFAULT '',
    until_time  INTEGER NOT NULL DEFAULT 0,
    sealed      BLOB NOT NULL DEFAULT x'',
    message     TEXT NOT NULL DEFAULT '',
    create_time INTEGER NOT NULL,
    expire_time INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX portal_launches_by_owner ON portal_launches (owner, expire_time);
CREATE INDEX portal_launches_by_expiry ON portal_launches (expire_time);

-- +goose Down
DROP TABLE portal_launches;
