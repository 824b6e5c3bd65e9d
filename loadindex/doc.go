// Package loadindex computes a session host's load index (SPEC §6, R-IDX1..4)
// and the stale-metric compensation of R-LI6. It holds pure functions only, so
// the placement engine, the server (to show a host's loadIndex: Present), the
// /metrics collector and the simulator all compute the same number from the
// same inputs. Which sample and which base a host keeps (R-LI6) is the
// domain's rule, vdibroker.Resample, which the store and the simulator apply.
package loadindex
