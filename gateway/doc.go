// Package gateway is vdibroker's RD Gateway: it speaks the HTTP transport
// of MS-TSGU (package tsgu) to RDP clients such as mstsc and FreeRDP, over
// two HTTP/1.1 connections (RDG_OUT_DATA then RDG_IN_DATA, joined by the
// RDG-Connection-Id header) or one WebSocket, and tunnels each client to
// exactly one session host: the one named by the broker-signed access token
// (package gatewaytoken) the client presents as its PAA cookie.
//
// The gateway keeps no database. It checks the token with public keys,
// asks the Broker once per token id whether the tunnel may open (a token
// is good for one client), reports when the host was reached and when the
// tunnel closed, and enforces its limits: per-address rate of anonymous
// requests, tunnels per user, idle time and lifetime, and how long it holds
// a client while the host starts.
//
// Gateway is an http.Handler with Close, so it runs as `vdibroker gateway`
// or inside another server.
package gateway
