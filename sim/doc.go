// Package sim is vdibroker's discrete-event simulator: it replays a scenario
// of users arriving, disconnecting, reconnecting and logging off against the
// real placement engine (package placement, not a copy) on a simulated
// clock, and reports how each algorithm and maxSessionLimit would have done:
// sessions placed and rejected, limit violations, the spread of sessions
// across hosts, peak CPU, the host hours that had to be powered on and the
// logon-storm overshoot that stale metrics allow (R-LI6).
//
// The simulator plays the agent of every host: at each metrics interval it
// samples each host (cpuPercent from its active sessions); every 10 s it
// reports the heartbeat, which carries the last sample and promotes Pending
// sessions to Active (R-S2), and the engine takes the sample through
// vdibroker.Resample, the store's R-LI6 rule. In between it keeps the
// engine's session counts current (R-S1) with Apply on every placement and
// Upsert on every other change.
//
// A scenario is YAML (see examples/); Parse refuses bad input with the file,
// the line and the field. Run is deterministic: the same scenario and seed
// give the same Report, byte for byte once encoded.
package sim
