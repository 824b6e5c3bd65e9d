-- +goose Up
-- A session host's name is unique in its pool ignoring the case of its
-- ASCII letters and one trailing dot, as Windows and DNS compare host
-- names (R-SEC, R-D3): OFFICE-01 and office-01. beside office-01 are one
-- machine. The unique index below is over the name so folded; the
-- expression is written exactly so in store/hosts.go (hostNameKeySQL),
-- whose look-ups it serves. lower() folds ASCII only on both engines
-- (SQLite's built-in; PostgreSQL's in the "C" collation of the column),
-- and names are ASCII (SPEC §3).
--
-- name_key_tiebreak is empty for every host but those a store already
-- held beside another of the same folded name, written before this
-- migration: all but the oldest of each such group (by create_time, then
-- name) keep their own name there, which makes their key unique again
-- without renaming or deleting anything an admin sees. The broker logs
-- them at every start until an admin deletes one of each pair
-- (docs/operations.md). A writer that does not know the column (a
-- replica of the release before, during an upgrade) writes it empty, so
-- the index holds for its hosts too.
ALTER TABLE session_hosts ADD COLUMN name_key_tiebreak TEXT NOT NULL DEFAULT '';
-- A plain index first, so that finding the older twin of each host is a
-- probe, not a walk of the pool's hosts per host.
CREATE INDEX session_hosts_name_key_build ON session_hosts (host_pool,
    lower(CASE WHEN substr(name, length(name), 1) = '.' THEN substr(name, 1, length(name) - 1) ELSE name END));
-- The oldest of a group is never written here, so whatever order the
-- rows are updated in, every other member still finds it.
UPDATE session_hosts SET name_key_tiebreak = name
WHERE EXISTS (SELECT 1 FROM session_hosts o
    WHERE o.host_pool = session_hosts.host_pool
    AND lower(CASE WHEN substr(o.name, length(o.name), 1) = '.' THEN substr(o.name, 1, length(o.name) - 1) ELSE o.name END)
        = lower(CASE WHEN substr(session_hosts.name, length(session_hosts.name), 1) = '.' THEN substr(session_hosts.name, 1, length(session_hosts.name) - 1) ELSE session_hosts.name END)
    AND (o.create_time < session_hosts.create_time OR (o.create_time = session_hosts.create_time AND o.name < session_hosts.name)));
DROP INDEX session_hosts_name_key_build;
CREATE UNIQUE INDEX session_hosts_name_key ON session_hosts (host_pool,
    lower(CASE WHEN substr(name, length(name), 1) = '.' THEN substr(name, 1, length(name) - 1) ELSE name END),
    name_key_tiebreak);
-- The start's warning reads the few hosts kept apart by a tiebreak.
CREATE INDEX session_hosts_name_tiebroken ON session_hosts (host_pool) WHERE name_key_tiebreak <> '';
-- A deleted host's name under the same key: a registration token issued
-- before the delete does not bring the machine back as OFFICE-01 either
-- (store/hosts.go, deletedHostQuery).
CREATE INDEX deleted_hosts_name_key ON deleted_hosts (host_pool,
    lower(CASE WHEN substr(name, length(name), 1) = '.' THEN substr(name, 1, length(name) - 1) ELSE name END));

-- +goose Down
DROP INDEX deleted_hosts_name_key;
DROP INDEX session_hosts_name_tiebroken;
DROP INDEX session_hosts_name_key;
ALTER TABLE session_hosts DROP COLUMN name_key_tiebreak;
