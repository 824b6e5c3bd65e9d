// Package deploy holds the files that install vdibroker on a machine:
// the systemd units of the broker (vdibroker.service), of the host agent
// (vdibroker-agent.service) and of the RD gateway
// (vdibroker-gateway.service), and their environment files (broker.env,
// agent.env, gateway.env), which hold their settings as
// VDIBROKER_<FLAG>=value lines, set or shown commented out.
// docs/operations.md, docs/agent.md and docs/gateway.md say how to
// install them; the package's tests check the units with systemd-analyze
// verify and start the programs as the units do, with the environment
// files as shipped.
package deploy

import "embed"

// Files is the units and environment files.
//
//go:embed *.service *.env
var Files embed.FS
