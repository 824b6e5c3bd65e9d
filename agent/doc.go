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
//     kernel's counters on Linux, gopsutil and PDH on Windows; the
//     arithmetic is in pure functions over parsed /proc/stat and
//     /proc/diskstats samples and PDH's readings).
//   - SessionProvider lists sessions and carries out logoff, disconnect and
//     send-message (systemd-logind, utmp, xrdp's X servers in /proc, the
//     Windows WTS API, a JSON file, or none).
//
// The custom load value (R-IDX3) comes from a script or, on Windows, a
// registry value (Horizon's CustomLoadValue).
//
// Platform code lives in _linux.go / _windows.go / _other.go files, and
// only the calls into the system do: what is decided about their answers
// (the WTS session states, user names, PDH's statuses, the registry data,
// the state directory's SDDL) is in files without a build tag, tested on
// every system. Elsewhere the logind, utmp, xrdp and wts providers answer
// ErrUnsupported.
package agent
