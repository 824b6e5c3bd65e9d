-- +goose Up
-- The functions of the count triggers (00067 web_session_counts, 00068
-- portal_launch_count) name their tables without a schema, which
-- PostgreSQL looks up on the search_path of the session that fires the
-- trigger, not of the one that made it. A session whose search_path is
-- another schema (a DBA's, signing users out with DELETE FROM
-- <schema>.web_sessions, in a database whose public schema holds a second
-- install) changed that schema's counts and left ours off for good, so
-- the bounds read from them (R-SEC "Web sessions", R-U7) let in too many
-- sign-ins or launches, or too few; without such a table there it failed
-- the statement. Each function now looks in the schema it is in (then
-- pg_temp, last, so no temporary table of a session stands in for ours).
-- +goose StatementBegin
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['web_sessions_counted', 'web_sessions_uncounted', 'portal_launches_counted', 'portal_launches_uncounted'] LOOP
        EXECUTE format('ALTER FUNCTION %I.%I() SET search_path = %I, pg_temp', current_schema(), f, current_schema());
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['web_sessions_counted', 'web_sessions_uncounted', 'portal_launches_counted', 'portal_launches_uncounted'] LOOP
        EXECUTE format('ALTER FUNCTION %I.%I() RESET search_path', current_schema(), f);
    END LOOP;
END
$$;
-- +goose StatementEnd
