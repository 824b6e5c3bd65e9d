-- +goose Up
-- How many launches the pod keeps (R-U7): a launch reads the pod's bound
-- here instead of counting the rows, which grew with the bound (a
-- logon storm through the portal keeps every launch two minutes after
-- it ended). Kept by the triggers below, once per statement, whatever
-- inserts or deletes (a statement that changed no row writes nothing:
-- every launch deletes the expired ones first, mostly none).
-- Replicas of the release before may make and take launches meanwhile
-- (without the triggers): the count must not miss one they commit
-- between it and the triggers, which would then never count it. So
-- lock out their inserts and deletes first, waiting for those open (as
-- CREATE TRIGGER would, after the count), at most 10 s (then the
-- migration fails and runs again at the next start).
SET LOCAL lock_timeout = '10s';
LOCK TABLE portal_launches IN SHARE ROW EXCLUSIVE MODE;
CREATE TABLE portal_launch_count (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n  BIGINT NOT NULL
);
INSERT INTO portal_launch_count (id, n) SELECT 1, count(*) FROM portal_launches;

-- +goose StatementBegin
CREATE FUNCTION portal_launches_counted() RETURNS trigger AS $$
BEGIN
    UPDATE portal_launch_count SET n = n + (SELECT count(*) FROM added) WHERE id = 1 AND EXISTS (SELECT 1 FROM added);
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd
CREATE TRIGGER portal_launches_counted AFTER INSERT ON portal_launches
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION portal_launches_counted();

-- +goose StatementBegin
CREATE FUNCTION portal_launches_uncounted() RETURNS trigger AS $$
BEGIN
    UPDATE portal_launch_count SET n = n - (SELECT count(*) FROM removed) WHERE id = 1 AND EXISTS (SELECT 1 FROM removed);
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd
CREATE TRIGGER portal_launches_uncounted AFTER DELETE ON portal_launches
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION portal_launches_uncounted();

-- +goose Down
DROP TRIGGER portal_launches_uncounted ON portal_launches;
DROP TRIGGER portal_launches_counted ON portal_launches;
DROP FUNCTION portal_launches_uncounted();
DROP FUNCTION portal_launches_counted();
DROP TABLE portal_launch_count;
