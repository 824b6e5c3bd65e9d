// Package http is the broker's HTTP adapter: the API of SPEC §9 under
// /api/v1 (host pools, session hosts, user sessions, connect, tokens, the
// agent's register and heartbeat) served by Server on any vdibroker.Store,
// and Client, the typed Go client the CLI and the console use.
//
// Choices the SPEC leaves open, made here:
//   - R-P3 warnings are answered in the pool body as "warnings": [...] and in
//     a Warning header (299 - "...") per warning.
//   - Lists page with ?limit= (1..1000, default 100) and an opaque ?after=
//     cursor; nextLink is a path relative to the server
//     ("/api/v1/...?...&after=..."), present while more remain.
//   - API tokens: expiresInSeconds 60..315360000, or 0/absent for no expiry.
//   - Idempotency-Key on connect: the same key from the same caller for the
//     same pool gets the same answer for 24 hours (per server instance; across
//     replicas R-C6 keeps a connect idempotent anyway).
package http
