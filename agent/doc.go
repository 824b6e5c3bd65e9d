// Package agent is the vdibroker host agent: the program that runs on every
// session host (`vdibroker agent`). It registers the host with the broker
// once, keeps the host credential in its state directory, and then sends a
// heartbeat every few seconds with the host's metrics, its real user
// sessions, its own policy (R-LI5) and the results of the commands the broker
// asked it to run (R-S2, R-S4, SPEC §9).
//
// The parts a host differs in are small interfaces, so tests and the
// in-process demo can run an Agent with simulated parts:
//   - MetricsSource samples CPU, memory and disk (SystemMetrics reads the
//     kernel's counters; the arithmetic is in pure functions over parsed
//     /proc/stat and /proc/diskstats samples).
//   - SessionProvider lists sessions and carries out logoff, disconnect and
//     send-message (systemd-logind, utmp, xrdp's X servers in /proc, a JSON
//     file, or none).
//
// Platform code lives in _linux.go / _other.go pairs: on other systems the
// logind, utmp and xrdp providers answer ErrUnsupported.
package agent
