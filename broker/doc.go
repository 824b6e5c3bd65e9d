// Package broker implements the broker's services on a vdibroker.Store:
// connect (connect.go), hosts (hosts.go, and heartbeat.go for the
// agents), sessions, pools, scaling plans, tokens and audit, each the
// vdibroker interface of the same name; Services returns them as one
// vdibroker.Services, which cmd/vdibroker hands to the HTTP server. New
// wires the parts the services are built from:
//
//   - broker/poolview: the in-memory placement view of each pool and its
//     landing protocol;
//   - broker/outage: the store's health, the guard every store call goes
//     through, and the fallback while the store is down (reconnects from
//     memory, outage placement, held heartbeats);
//   - power: the power service (start, stop, start VM on connect);
//   - the maintenance loop (service.go): pending timeout (R-S3), refreshing
//     the views, pruning the history.
//
// A connect is looked up (the user's open session, R-C1), decided (the
// placement engine on the pool's view), committed (the store enforces
// R-C4 and R-C6, R-D3) and, when it lost a race to another connect or
// replica, decided again under one retry rule (connectRound.again). When
// the store is down before anything was decided, the outage mode answers
// instead, once (outage.Mode.Connect). The answer carries the host, its
// address and an .rdp file (package rdp).
//
// The services own the writes that change what placement sees (pool
// settings, hosts, registrations, heartbeats, sessions ended by an admin),
// so that the views stay current with this server's own changes; changes
// made by other replicas are picked up by the maintenance loop.
//
// A service authorizes its caller where only it sees the target (a
// scaling plan's pools, the user a connect is for): vdibroker.Authorize
// with the principal of its context; a context without one is the broker
// itself (a background job, a pod-to-pod call).
package broker
