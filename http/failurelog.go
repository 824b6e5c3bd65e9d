package http

import (
	"log/slog"
	"time"
)

// First and longest wait between a failureLog's reminders.
const (
	failureReminderFirst = time.Minute
	failureReminderMax   = time.Hour
)

// failureLog logs a task tried again and again (a tick's write to the
// store) as one failure rather than a line for each try: a warning at
// the first try that fails, with its error; while the tries keep
// failing, a reminder with their count and the latest error after
// failureReminderFirst, then at doubling waits up to failureReminderMax
// (a day's outage makes some 30 lines, not one every tick); and once a
// try goes through, one line saying how long the task failed. It is used
// by one goroutine.
type failureLog struct {
	log *slog.Logger
	// what names the task; failed says what a failure means to an
	// admin, in the first warning.
	what, failed string

	// since is the first failure of the run (zero: the last try went
	// through); failures counts the run's failed tries; remind is when
	// the next reminder is due, wait the wait before it.
	since, remind time.Time
	failures      int
	wait          time.Duration
}

// note records a try's outcome at now: err nil when it went through.
func (l *failureLog) note(now time.Time, err error) {
	switch {
	case err == nil && l.since.IsZero():
	case err == nil:
		l.log.Info(l.what+": works again", "failedFor", now.Sub(l.since).Round(time.Second), "failures", l.failures)
		l.since, l.failures = time.Time{}, 0
	case l.since.IsZero():
		l.since, l.failures, l.wait = now, 1, failureReminderFirst
		l.remind = now.Add(l.wait)
		l.log.Warn(l.what+": "+l.failed, "err", err)
	default:
		l.failures++
		if now.Before(l.remind) {
			return
		}
		l.log.Warn(l.what+": still failing", "failingFor", now.Sub(l.since).Round(time.Second), "failures", l.failures, "err", err)
		l.wait = min(2*l.wait, failureReminderMax)
		l.remind = now.Add(l.wait)
	}
}
