package broker

import (
	"context"
	"sync"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/broker/outage"
)

// Replicas on one database compare times each of them stamped: a
// heartbeat's age (R-H1), the autoscale lease, the session directory's
// passes over the ids another replica made (R-G1). The maintenance loop
// compares this replica's clock with the database server's once every
// clockCheckEvery and says, in the log and in ClockOffset (the metric
// vdibroker_clock_offset_seconds), when it is more than
// vdibroker.ClockTolerance away. It changes nothing: a clock is the
// machine's to keep (NTP), and the database's is the one every replica
// can see.

const (
	// clockCheckEvery is how often the clock is compared.
	clockCheckEvery = time.Minute
	// clockWarnEvery is how often a clock that stays off is logged again.
	clockWarnEvery = 10 * time.Minute
)

// clockCheck is the last comparison (the maintenance loop writes it,
// scrapes read it).
type clockCheck struct {
	mu       sync.Mutex
	at       time.Time     // when it was made (zero: never)
	known    bool          // a reading told within from off (offset and off are its)
	offset   time.Duration // this replica's clock minus the database's
	off      bool          // beyond the tolerance
	warnedAt time.Time     // the last warning of this stretch off
}

// clockOffset works out this replica's clock minus the database's from a
// reading db taken between t0 and t1 on this replica's clock: the
// database read its clock at some moment of the call, so the middle is
// the best guess, and half the call's length the uncertainty. off says
// the offset is beyond vdibroker.ClockTolerance even at the nearest end
// of that uncertainty.
func clockOffset(t0, t1, db time.Time) (offset, uncertainty time.Duration, off bool) {
	uncertainty = t1.Sub(t0) / 2
	offset = t0.Add(uncertainty).Sub(db)
	return offset, uncertainty, offset.Abs()-uncertainty > vdibroker.ClockTolerance
}

// checkClockIfDue compares the clocks, at most once every
// clockCheckEvery (the first tick after start included), and at once
// after this replica's clock went back. A failed read
// is not a finding: it is tried at the next tick.
func (s *Service) checkClockIfDue(ctx context.Context) {
	c := &s.clockCheck
	c.mu.Lock()
	// A clock set back (by NTP, say) is compared at once. On the wall
	// clocks: time.Now's monotonic readings, which Sub uses when both
	// times have one, do not go back when the clock is set.
	since := s.now().Round(0).Sub(c.at.Round(0))
	due := c.at.IsZero() || since < 0 || since >= clockCheckEvery
	c.mu.Unlock()
	if !due {
		return
	}
	t0 := s.now()
	db, err := s.store.DatabaseTime(ctx)
	t1 := s.now()
	if err != nil {
		if ctx.Err() == nil && !outage.IsStoreDown(err) {
			s.log.Warn("clock check: reading the database's clock", "err", err)
		}
		return
	}
	offset, uncertainty, off := clockOffset(t0, t1, db)
	c.mu.Lock()
	// A reading too uncertain to tell (a call longer than the offset's
	// distance from the tolerance, on a slow store) changes nothing and
	// is tried again at the next tick, as a failed one: taken as within,
	// it said "within again" of a clock still off, and the next prompt
	// reading warned anew, every minute.
	if !off && offset.Abs()+uncertainty > vdibroker.ClockTolerance {
		c.mu.Unlock()
		return
	}
	was := c.off
	c.known = true
	warn := off && (!was || t1.Sub(c.warnedAt) >= clockWarnEvery)
	c.at, c.offset, c.off = t1, offset, off
	if warn {
		c.warnedAt = t1
	}
	c.mu.Unlock()
	switch {
	case warn:
		s.log.Warn("this replica's clock is off the database server's: keep every replica's and the database's clock synchronized (NTP); until then heartbeat ages, the autoscale lease and the session directory may judge wrongly",
			"offset", offset, "uncertainty", uncertainty, "tolerance", vdibroker.ClockTolerance)
	case !off && was:
		s.log.Info("this replica's clock is within the tolerance of the database server's again",
			"offset", offset, "uncertainty", uncertainty, "tolerance", vdibroker.ClockTolerance)
	}
}

// ClockOffset returns this replica's clock minus the database server's
// at the last comparison that could tell within from off; ok is false
// before the first.
func (s *Service) ClockOffset() (offset time.Duration, ok bool) {
	c := &s.clockCheck
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset, c.known
}

// ClockOff reports whether this replica's clock was off the database
// server's, beyond vdibroker.ClockTolerance, at the last comparison, and
// by how much.
func (s *Service) ClockOff() (offset time.Duration, off bool) {
	c := &s.clockCheck
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset, c.off
}
