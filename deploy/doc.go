// Package deploy holds the files that install vdibroker on a machine:
// the systemd units of the broker (vdibroker.service) and of the host
// agent (vdibroker-agent.service), and their environment files
// (broker.env, agent.env), which hold every optional setting as
// VDIBROKER_<FLAG>=value lines. docs/operations.md and docs/agent.md say
// how to install them; the package's tests check the units with
// systemd-analyze verify and start the programs as the units do, with the
// environment files as shipped.
package deploy

import "embed"

// Files is the units and environment files.
//
//go:embed *.service *.env
var Files embed.FS
