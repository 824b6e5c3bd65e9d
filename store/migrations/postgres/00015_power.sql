-- +goose Up
-- Power (R-A4, R-A3). A host's power state as its power driver last
-- said or the broker last asked ('' until either happened: the host is
-- then Running while its agent heartbeats, Unknown otherwise), when it was
-- set (ns, 0 for never), and the autoscaler's drain, which is kept apart
-- from an admin's (allow_new_session) so neither clears the other.
ALTER TABLE session_hosts ADD COLUMN power_state TEXT NOT NULL DEFAULT '';
ALTER TABLE session_hosts ADD COLUMN power_state_time BIGINT NOT NULL DEFAULT 0;
ALTER TABLE session_hosts ADD COLUMN autoscale_drain BOOLEAN NOT NULL DEFAULT FALSE;

-- A pool's power driver (a name of serve --power-config, '' for none) and
-- whether a connect that finds no capacity starts a stopped host. Columns,
-- like the pool's other settings.
ALTER TABLE host_pools ADD COLUMN power_driver TEXT NOT NULL DEFAULT '';
ALTER TABLE host_pools ADD COLUMN start_vm_on_connect BOOLEAN NOT NULL DEFAULT FALSE;

-- +goose Down
ALTER TABLE host_pools DROP COLUMN start_vm_on_connect;
ALTER TABLE host_pools DROP COLUMN power_driver;
ALTER TABLE session_hosts DROP COLUMN autoscale_drain;
ALTER TABLE session_hosts DROP COLUMN power_state_time;
ALTER TABLE session_hosts DROP COLUMN power_state;
