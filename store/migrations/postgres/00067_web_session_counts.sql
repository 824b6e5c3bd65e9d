-- +goose Up
-- How many sign-ins each area holds (R-SEC, "Web sessions"): a sign-in
-- reads its area's bound here instead of counting the area's rows, which
-- took 50 ms at 250,000 portal sign-ins, while the area's sign-ins wait
-- on its lock. Kept by the triggers below, once per statement, whatever
-- deletes rows (a sign-out, a replaced sign-in, the sweep, a restore);
-- expired rows count until they are deleted (a sign-in into a full area
-- deletes its expired rows first).
-- The copy must not miss a sign-in or sign-out of a replica still
-- running the release before (they upgrade one by one): one committed
-- after the count and before the triggers would be off for good. So the
-- table's writes wait from the count until the triggers are in place,
-- at most 10 s (then the migration fails and runs again at the next
-- start).
SET LOCAL lock_timeout = '10s';
LOCK TABLE web_sessions IN SHARE ROW EXCLUSIVE MODE;
CREATE TABLE web_session_counts (
    area TEXT PRIMARY KEY,
    n    BIGINT NOT NULL
);
INSERT INTO web_session_counts (area, n) SELECT area, count(*) FROM web_sessions GROUP BY area;

-- +goose StatementBegin
CREATE FUNCTION web_sessions_counted() RETURNS trigger AS $$
BEGIN
    INSERT INTO web_session_counts (area, n)
        SELECT area, count(*) FROM added GROUP BY area
        ON CONFLICT (area) DO UPDATE SET n = web_session_counts.n + EXCLUDED.n;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd
CREATE TRIGGER web_sessions_counted AFTER INSERT ON web_sessions
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION web_sessions_counted();

-- +goose StatementBegin
CREATE FUNCTION web_sessions_uncounted() RETURNS trigger AS $$
BEGIN
    UPDATE web_session_counts c SET n = c.n - d.k
        FROM (SELECT area, count(*) AS k FROM removed GROUP BY area) d WHERE c.area = d.area;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd
CREATE TRIGGER web_sessions_uncounted AFTER DELETE ON web_sessions
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION web_sessions_uncounted();

-- +goose Down
DROP TRIGGER web_sessions_uncounted ON web_sessions;
DROP TRIGGER web_sessions_counted ON web_sessions;
DROP FUNCTION web_sessions_uncounted();
DROP FUNCTION web_sessions_counted();
DROP TABLE web_session_counts;
