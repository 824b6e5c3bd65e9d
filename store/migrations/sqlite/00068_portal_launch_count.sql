-- +goose Up
-- How many launches the pod keeps (R-U7): a launch reads the pod's bound
-- here instead of counting the rows, which grew with the bound (a
-- logon storm through the portal keeps every launch two minutes after
-- it ended). Kept by the triggers below, whatever inserts or deletes.
CREATE TABLE portal_launch_count (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n  INTEGER NOT NULL
);
INSERT INTO portal_launch_count (id, n) SELECT 1, count(*) FROM portal_launches;

-- +goose StatementBegin
CREATE TRIGGER portal_launches_counted AFTER INSERT ON portal_launches
BEGIN
    UPDATE portal_launch_count SET n = n + 1 WHERE id = 1;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER portal_launches_uncounted AFTER DELETE ON portal_launches
BEGIN
    UPDATE portal_launch_count SET n = n - 1 WHERE id = 1;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER portal_launches_uncounted;
DROP TRIGGER portal_launches_counted;
DROP TABLE portal_launch_count;
