// Package http is the broker's HTTP adapter: Server serves the API of
// SPEC §9 under /api/v1 (host pools, session hosts, user sessions, connect,
// registration and API tokens, the agent's register and heartbeat) plus
// /healthz on any vdibroker.Store, and Client is the typed Go client of the
// whole API that the CLI and the console use.
//
// Connect (SPEC §4) works from an in-memory placement.Placer per host pool,
// loaded from the store and kept current by this server's own changes; the
// store's CommitPlacement is the authority (R-D3): a placement that lost a
// race with another replica is decided again from fresh data. See place in
// connect.go.
//
// Choices the SPEC leaves open, made here:
//   - R-P3 warnings are answered in the pool body as "warnings": [...] (also
//     on GET) and in a Warning header (299 vdibroker "...") per warning.
//   - Lists page with ?limit= (1..1000, default 100) and an opaque ?after=
//     cursor; nextLink is a path relative to the server
//     ("/api/v1/...?after=...&limit=..."), present while more remain.
//   - PUT of a session host without "address" keeps the registered address.
//   - DELETE of a Pending session the agent never reported ends it at once
//     (reason LoggedOffByAdmin) and still queues the Logoff; Disconnect
//     needs an Active session. Commands on ended sessions are a Conflict.
//   - API tokens: expiresInSeconds 60..315360000, or 0/absent for no expiry.
//     Registration tokens: absent expiresInSeconds means 3600.
//   - Idempotency-Key on connect: the same key from the same token for the
//     same pool and user gets the same (successful) answer for 24 hours, per
//     server instance; across replicas R-C6 keeps connects idempotent anyway.
//   - A known path with another method answers 405 with code
//     MethodNotAllowed; unknown paths under /api/v1 answer 404 NotFound.
//   - Secrets are prefixed by kind: vdbt_ (API token), vdbr_ (registration
//     token), vdbh_ (host credential); each is stored as hex SHA-256.
package http
