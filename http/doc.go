// Package http is the broker's HTTP adapter: Server serves the API of
// SPEC §9 under /api/v1 (host pools, session hosts, user sessions, connect,
// registration and API tokens, scaling plans, the audit log, the agent's
// register and heartbeat, the federation API and the signed pod-to-pod
// API) plus /healthz, and Client is the typed Go client of the API that the
// CLI and the demo use.
//
// A handler decodes the request, calls one of the broker's services
// (vdibroker.Services, given by cmd/vdibroker: the server holds the
// interfaces, never the store or the services' packages) and encodes the
// answer; errors become the one error body in writeError. Before the
// handler, handle authenticates the caller (the admin token, an OpenID
// Connect identity or an API token) and asks vdibroker.Authorize for the
// route's action on the route's pool; the principal rides in the request's
// context to the services, which authorize what only they see. The web
// console (package console) calls this API in-process with the signed-in
// user's token, so it gets the same checks.
//
// Choices the SPEC leaves open, made here:
//   - R-P3 warnings are answered in the pool body as "warnings": [...] (also
//     on GET) and in a Warning header (299 vdibroker "...") per warning;
//     a write's own warning (R-P1, HostPool.WriteWarning) joins them in
//     that write's answer only.
//   - Lists page with ?limit= (1..1000, default 100) and an opaque ?after=
//     cursor; nextLink is a path relative to the server
//     ("/api/v1/...?after=...&limit=..."), present while more remain.
//   - PUT of a session host without "address" keeps the registered address.
//   - DELETE of a Pending session the agent never reported ends it at once
//     (reason LoggedOffByAdmin) and still queues the Logoff, answered with
//     "sessionEnded": true; Disconnect
//     needs an Active session. Commands on ended sessions are a Conflict.
//   - API tokens: expiresInSeconds 60..315360000, or 0/absent for no expiry.
//     Registration tokens: absent expiresInSeconds means 3600.
//   - Idempotency-Key on connect: the same key from the same token for the
//     same pool and user gets the same (successful) answer for 24 hours, per
//     server instance (100,000 keys, an end user's 100); across replicas
//     R-C6 keeps connects idempotent anyway.
//   - A known path with another method answers 405 with code
//     MethodNotAllowed and the Allow header; unknown paths under /api/v1
//     answer 404 NotFound.
//   - Secrets are prefixed by kind: vdbt_ (API token), vdbr_ (registration
//     token), vdbh_ (host credential); each is stored as hex SHA-256.
package http
