-- +goose Up
-- Entitlements (R-E1..R-E11): who may use what.
--
-- Application groups, as in Azure Virtual Desktop: a host pool's one
-- Desktop group and its RemoteApp groups (R-E1). The unique partial index
-- is what keeps a pool at one Desktop group against every replica.
CREATE TABLE application_groups (
    name          TEXT COLLATE "C" PRIMARY KEY,
    host_pool     TEXT COLLATE "C" NOT NULL,
    type          TEXT COLLATE "C" NOT NULL, -- Desktop or RemoteApp
    friendly_name TEXT NOT NULL,
    description   TEXT NOT NULL,
    all_users     BOOLEAN NOT NULL,
    create_time   BIGINT NOT NULL,
    update_time   BIGINT NOT NULL
);
CREATE INDEX application_groups_by_pool ON application_groups (host_pool, name);
CREATE UNIQUE INDEX application_groups_one_desktop ON application_groups (host_pool) WHERE type = 'Desktop';

-- A group's assignments (R-E2): one row per user or group, as first given
-- (principal) and as compared (principal_key: FoldUser, computed by the
-- broker so both engines compare alike, R-E5). A connect asks for its
-- user's and groups' rows by key.
CREATE TABLE application_group_assignments (
    application_group TEXT COLLATE "C" NOT NULL,
    kind              TEXT COLLATE "C" NOT NULL, -- user or group
    principal_key     TEXT COLLATE "C" NOT NULL,
    principal         TEXT NOT NULL,
    position          BIGINT NOT NULL,
    PRIMARY KEY (application_group, kind, principal_key)
);
CREATE INDEX application_group_assignments_by_principal
    ON application_group_assignments (kind, principal_key, application_group);

-- A RemoteApp group's applications (R-E7).
CREATE TABLE applications (
    application_group      TEXT COLLATE "C" NOT NULL,
    name                   TEXT COLLATE "C" NOT NULL,
    file_path              TEXT NOT NULL,
    command_line_setting   TEXT COLLATE "C" NOT NULL,
    command_line_arguments TEXT NOT NULL,
    friendly_name          TEXT NOT NULL,
    show_in_portal         BOOLEAN NOT NULL,
    icon_path              TEXT NOT NULL,
    create_time            BIGINT NOT NULL,
    update_time            BIGINT NOT NULL,
    PRIMARY KEY (application_group, name)
);

-- R-E4: every pool that exists before this migration stays usable for
-- the end users who used it: it gets a Desktop group for all users. New
-- pools start with none.
INSERT INTO application_groups (name, host_pool, type, friendly_name, description, all_users, create_time, update_time)
    SELECT name || '-DAG', name, 'Desktop', '',
        'The desktops of host pool ' || name || ' for all users, made by the upgrade that brought application groups (R-E4).',
        TRUE, create_time, create_time
    FROM host_pools;

-- A pool's own .rdp properties (R-E8) and a User token's groups (R-E6).
ALTER TABLE host_pools ADD COLUMN custom_rdp_property TEXT NOT NULL DEFAULT '';
ALTER TABLE tokens ADD COLUMN groups TEXT NOT NULL DEFAULT '[]';

-- User names compare without regard to case (R-E5): user_key is
-- FoldUser(user_name), written by the broker with every session, and the
-- indexes of a user's sessions, R-C6's unique one first, are on it. Here
-- ASCII is folded, by translate(), which unlike lower() does not depend
-- on the database's locale; the broker folds the names with other letters
-- in Go when it opens the store (store.foldUserKeys), once:
-- user_keys_folded gets a row when that is done.
ALTER TABLE user_sessions ADD COLUMN user_key TEXT COLLATE "C" NOT NULL DEFAULT '';
UPDATE user_sessions SET user_key = translate(user_name, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz');
DROP INDEX user_sessions_one_per_pooled_user;
-- Before R-E5, Alice and alice could each hold an open session in one
-- pool: the later ones stop being "pooled" (they stay open and counted,
-- and a connect of either name finds them, as it finds an adopted
-- session), so the unique index can be built and holds from now on.
CREATE INDEX user_sessions_case_twins ON user_sessions (host_pool, user_key, id) WHERE pooled AND state <> 'LoggedOff';
UPDATE user_sessions SET pooled = FALSE
    WHERE pooled AND state <> 'LoggedOff' AND EXISTS (SELECT 1 FROM user_sessions AS first
        WHERE first.host_pool = user_sessions.host_pool AND first.user_key = user_sessions.user_key
        AND first.pooled AND first.state <> 'LoggedOff' AND first.id < user_sessions.id);
DROP INDEX user_sessions_case_twins;
CREATE UNIQUE INDEX user_sessions_one_per_pooled_user
    ON user_sessions (host_pool, user_key) WHERE pooled AND state <> 'LoggedOff';
DROP INDEX user_sessions_open_unpooled_by_user;
CREATE INDEX user_sessions_open_unpooled_by_user
    ON user_sessions (host_pool, user_key) WHERE NOT pooled AND state <> 'LoggedOff';
DROP INDEX user_sessions_ended_by_user;
CREATE INDEX user_sessions_ended_by_user
    ON user_sessions (host_pool, user_key, id) WHERE state = 'LoggedOff';
CREATE TABLE user_keys_folded (folded BOOLEAN NOT NULL);

-- +goose Down
DROP TABLE user_keys_folded;
DROP INDEX user_sessions_ended_by_user;
CREATE INDEX user_sessions_ended_by_user
    ON user_sessions (host_pool, user_name, id) WHERE state = 'LoggedOff';
DROP INDEX user_sessions_open_unpooled_by_user;
CREATE INDEX user_sessions_open_unpooled_by_user
    ON user_sessions (host_pool, user_name) WHERE NOT pooled AND state <> 'LoggedOff';
DROP INDEX user_sessions_one_per_pooled_user;
CREATE UNIQUE INDEX user_sessions_one_per_pooled_user
    ON user_sessions (host_pool, user_name) WHERE pooled AND state <> 'LoggedOff';
ALTER TABLE user_sessions DROP COLUMN user_key;
ALTER TABLE tokens DROP COLUMN groups;
ALTER TABLE host_pools DROP COLUMN custom_rdp_property;
DROP TABLE applications;
DROP TABLE application_group_assignments;
DROP TABLE application_groups;
