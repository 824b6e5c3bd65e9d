-- +goose Up
-- Whether an admitted tunnel reached its host (R-GW2): a tunnel reaches
-- it once, so a gateway's second report of it, like a second close,
-- changes nothing and is not audited again (R-GW4: every tunnel's open,
-- reach and close is audited once, not each time a gateway repeats it).
ALTER TABLE gateway_tunnels ADD COLUMN reached BOOLEAN NOT NULL DEFAULT FALSE;

-- +goose Down
ALTER TABLE gateway_tunnels DROP COLUMN reached;
