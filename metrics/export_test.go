package metrics

import "time"

// SetNow makes InstrumentAPI time requests with clock until restore.
func SetNow(clock func() time.Time) (restore func()) {
	old := now
	now = clock
	return func() { now = old }
}
