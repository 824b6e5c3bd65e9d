// Package demo is the simulated fleet behind `vdibroker demo`: three host
// pools (BreadthFirst, DepthFirst with a limit, LoadIndex), about twenty
// session hosts whose in-process agents (agent.Agent) register, heartbeat
// with moving metrics and report their users, and users who log on, log
// off, disconnect and come back along a slow daily wave. It also plays the
// Remote Desktop client of the user portal's user (Fleet.PortalUser): the
// session of each of her portal launches is logged on at its host
// (Fleet.portalLoop).
//
// A Fleet speaks to a running broker only through its HTTP API (the admin
// client and the agents' two endpoints), like real hosts and users do, so
// the demo exercises the same code as production. Starting the broker, its
// console and /metrics is the caller's business (cmd/vdibroker does it the
// way `serve` does).
package demo
