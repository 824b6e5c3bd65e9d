// Package autoscale is the autoscaler of scaling plans (R-SP, SPEC §8):
// pure arithmetic that says, for a pool at an instant, which schedule and
// phase apply (PhaseAt) and which hosts to start, drain and stop (Plan,
// R-A1..R-A3), and the loop (Autoscaler) that evaluates every pool of
// every plan at an interval, under a lease in the store so that of several
// replicas exactly one acts, and records every evaluation.
package autoscale
