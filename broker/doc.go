// Package broker is vdibroker's broker service: the one home of the connect
// path (SPEC §4) and of everything that keeps it exact.
//
// A connect is looked up (the user's open session, R-C1), decided (the
// placement engine on the pool's in-memory view), committed (the store
// enforces R-C4 and R-C6, R-D3) and, when it lost a race to another connect
// or replica, decided again under one retry rule. The answer carries the
// host, its address and an .rdp file.
//
// The service also owns the writes that change what placement sees (pool
// settings, hosts, registrations, heartbeats, sessions ended by an admin),
// so that its views stay current with this server's own changes; changes
// made by other replicas are picked up by the maintenance loop.
//
// Transports call it: the HTTP API (package http) decodes a request, calls
// the service and encodes its answer; the console, the pod-to-pod API and
// background jobs call the same methods.
package broker
