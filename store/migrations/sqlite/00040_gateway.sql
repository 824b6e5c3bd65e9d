-- +goose Up
-- RD gateways (R-GW1..R-GW6, docs/gateway.md).

-- A pool's gateway settings: whether its connects go through a gateway
-- (gatewayUsage), which one ('' for the server's), and the tunnel limits
-- the gateway is told in each token (minutes, 0 for the gateway's own).
ALTER TABLE host_pools ADD COLUMN gateway_usage TEXT NOT NULL DEFAULT 'Gateway';
ALTER TABLE host_pools ADD COLUMN gateway_host_name TEXT NOT NULL DEFAULT '';
ALTER TABLE host_pools ADD COLUMN idle_session_limit_minutes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE host_pools ADD COLUMN active_session_limit_minutes INTEGER NOT NULL DEFAULT 0;

-- The gateway that last reached a session's host and when (Unix ns, 0 for
-- never: the session is confirmed by a gateway once it is not 0, R-GW2),
-- and the token id of that tunnel: only its close disconnects the
-- session (R-GW3).
ALTER TABLE user_sessions ADD COLUMN gateway TEXT NOT NULL DEFAULT '';
ALTER TABLE user_sessions ADD COLUMN gateway_time BIGINT NOT NULL DEFAULT 0;
ALTER TABLE user_sessions ADD COLUMN gateway_tunnel TEXT NOT NULL DEFAULT '';

-- The keys access tokens are signed with, shared by every replica (R-GW6):
-- the Ed25519 seed, base64. The newest keys only (rotation deletes older
-- ones); the public halves are published at GET /api/v1/gateway/keys.
CREATE TABLE gateway_keys (
    kid         TEXT PRIMARY KEY,
    seed        TEXT NOT NULL,
    create_time BIGINT NOT NULL
);

-- One row per admitted token id (R-GW4): its primary key is what makes a
-- token open one tunnel across replicas. A row is kept until its token
-- expired and its tunnel is closed or past live_until (the most it may
-- live), then pruned; open rows count toward the user's tunnel limit.
CREATE TABLE gateway_tunnels (
    token_id    TEXT PRIMARY KEY,
    user_name   TEXT NOT NULL,
    host_pool   TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    gateway     TEXT NOT NULL,
    open_time   BIGINT NOT NULL,
    expire_time BIGINT NOT NULL,
    live_until  BIGINT NOT NULL,
    closed      BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE INDEX gateway_tunnels_open_by_user ON gateway_tunnels (user_name, live_until) WHERE NOT closed;
CREATE INDEX gateway_tunnels_by_expiry ON gateway_tunnels (expire_time);

-- +goose Down
DROP TABLE gateway_tunnels;
DROP TABLE gateway_keys;
ALTER TABLE user_sessions DROP COLUMN gateway_tunnel;
ALTER TABLE user_sessions DROP COLUMN gateway_time;
ALTER TABLE user_sessions DROP COLUMN gateway;
ALTER TABLE host_pools DROP COLUMN active_session_limit_minutes;
ALTER TABLE host_pools DROP COLUMN idle_session_limit_minutes;
ALTER TABLE host_pools DROP COLUMN gateway_host_name;
ALTER TABLE host_pools DROP COLUMN gateway_usage;
