package main

import "fmt"

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
