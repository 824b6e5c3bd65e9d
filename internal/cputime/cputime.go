// Package cputime reads the process's CPU time, for benchmarks that report
// an op's cost without the time other processes took the CPU on a shared
// machine.
package cputime
