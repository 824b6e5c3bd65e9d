package main

import (
	"fmt"
	"time"
)

// dataDirBusyError is lockDataDir's refusal: another process holds dir.
// Its message is serve's; restore says its own (its way out is not
// another data dir).
type dataDirBusyError struct{ dir, pid string }

func (e *dataDirBusyError) holder() string {
	if e.pid == "" {
		return ""
	}
	return " (pid " + e.pid + ")"
}

func (e *dataDirBusyError) Error() string {
	return fmt.Sprintf("data dir %s is in use by another vdibroker process%s: stop it, or give this one its own --data-dir (several brokers share state only through PostgreSQL, --database)", e.dir, e.holder())
}

// readsFrom is when a pod on SQLite that took its data dir at locked may
// start its server: the next whole second. The server keeps the nonces
// of pod-to-pod reads in memory and refuses a read signed before the
// second it started in (federation.Verifier.ReadsInMemory, R-G5); the
// process before it verified its last read before it let go of the data
// dir, so in an earlier second than that: a read it took and kept in
// memory only (signed no later than it was verified) is refused by its
// time, even when the process restarted within the second it was signed.
func readsFrom(locked time.Time) time.Time {
	return locked.Truncate(time.Second).Add(time.Second)
}
