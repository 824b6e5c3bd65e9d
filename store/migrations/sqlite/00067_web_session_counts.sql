-- +goose Up
-- How many sign-ins each area holds (R-SEC, "Web sessions"): a sign-in
-- reads its area's bound here instead of counting the area's rows, which
-- took a quarter of a second of the one writer at 250,000 portal
-- sign-ins. Kept by the triggers below, whatever deletes a row (a
-- sign-out, a replaced sign-in, the sweep, a restore); expired rows count
-- until they are deleted (a sign-in into a full area deletes its expired
-- rows first).
CREATE TABLE web_session_counts (
    area TEXT PRIMARY KEY,
    n    INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO web_session_counts (area, n) SELECT area, count(*) FROM web_sessions GROUP BY area;

-- +goose StatementBegin
CREATE TRIGGER web_sessions_counted AFTER INSERT ON web_sessions
BEGIN
    INSERT INTO web_session_counts (area, n) VALUES (NEW.area, 1)
        ON CONFLICT (area) DO UPDATE SET n = n + 1;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER web_sessions_uncounted AFTER DELETE ON web_sessions
BEGIN
    UPDATE web_session_counts SET n = n - 1 WHERE area = OLD.area;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER web_sessions_uncounted;
DROP TRIGGER web_sessions_counted;
DROP TABLE web_session_counts;
