package broker

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/internal/syncbuf"
	"github.com/vdibroker/vdibroker/store"
)

// TestClockOffset: this replica's clock minus the database's, from a
// reading taken during a call: the call's middle, half its length
// uncertain, off only beyond vdibroker.ClockTolerance at the nearest end.
func TestClockOffset(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	for _, c := range []struct {
		call, ahead time.Duration // the call's length; the database's clock ahead of the call's middle
		offset      time.Duration
		off         bool
	}{
		{call: 10 * ms, ahead: 0, offset: 0},
		{call: 10 * ms, ahead: 400 * ms, offset: -400 * ms},
		{call: 10 * ms, ahead: -600 * ms, offset: 600 * ms, off: true},
		{call: 10 * ms, ahead: 600 * ms, offset: -600 * ms, off: true},
		// 600 ms off, but a call of 400 ms cannot tell it from 400 ms.
		{call: 400 * ms, ahead: 600 * ms, offset: -600 * ms},
		{call: 400 * ms, ahead: 701 * ms, offset: -701 * ms, off: true},
	} {
		db := t0.Add(c.call / 2).Add(c.ahead)
		offset, uncertainty, off := clockOffset(t0, t0.Add(c.call), db)
		if offset != c.offset || uncertainty != c.call/2 || off != c.off {
			t.Errorf("a call of %s, the database %s ahead: offset %s ± %s, off %v; want %s ± %s, off %v",
				c.call, c.ahead, offset, uncertainty, off, c.offset, c.call/2, c.off)
		}
	}
}

// clockStore counts the reads of the database's clock; during, when set,
// runs within each (a slow call steps the replica's fake clock).
type clockStore struct {
	vdibroker.Store
	reads  atomic.Int64
	during func()
}

func (s *clockStore) DatabaseTime(ctx context.Context) (time.Time, error) {
	s.reads.Add(1)
	if s.during != nil {
		s.during()
	}
	return s.Store.DatabaseTime(ctx)
}

// logLines is a log written by several goroutines.
type logLines struct{ syncbuf.Buffer }

// count is how many lines hold s.
func (l *logLines) count(s string) int { return strings.Count(l.String(), s) }

// TestClockCheck: a replica compares its clock with the database's (a
// real SQLite store: this machine's clock) once a minute, at once after
// its clock went back, warns when it is off (again every ten minutes
// while it stays off) and says when it is back within the tolerance.
func TestClockCheck(t *testing.T) {
	ctx := t.Context()
	st, err := store.OpenWith(ctx, "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cs := &clockStore{Store: st}
	var logs logLines
	behind := 2000 * time.Second
	start := time.Now() // the fake clock's, behind
	fc := clocktesting.NewFakeClock(start.Add(-behind))
	// The loop never ticks here (a day's interval): the test calls the check.
	svc := New(Config{Store: cs, Clock: fc, MaintenanceInterval: 24 * time.Hour, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	t.Cleanup(func() { svc.Close() })
	const warning, within = "clock is off the database server's", "within the tolerance of the database server's again"

	if _, ok := svc.ClockOffset(); ok {
		t.Fatal("an offset before the first comparison")
	}
	svc.checkClockIfDue(ctx)
	// The database read its clock after start (New took some of it) and
	// before now.
	elapsed := time.Since(start)
	offset, ok := svc.ClockOffset()
	if !ok || offset > -behind+time.Millisecond || offset < -behind-elapsed-time.Millisecond {
		t.Fatalf("the clock %s behind: offset %s (measured %v); want about -%s", behind, offset, ok, behind)
	}
	if n := logs.count(warning); n != 1 {
		t.Fatalf("%d warnings of a clock %s behind; want 1", n, behind)
	}
	if got, off := svc.ClockOff(); !off || got != offset {
		t.Fatalf("ClockOff %s, %v; want %s, off", got, off, offset)
	}
	fc.Step(clockCheckEvery - time.Second)
	svc.checkClockIfDue(ctx)
	if n := cs.reads.Load(); n != 1 {
		t.Fatalf("%d reads of the database's clock within a minute; want 1", n)
	}
	for i := range 10 {
		fc.Step(time.Second)
		svc.checkClockIfDue(ctx)
		fc.Step(clockCheckEvery - time.Second)
		if n, want := logs.count(warning), 1+(i+1)/10; n != want {
			t.Fatalf("%d minutes off: %d warnings; want %d (again after %s)", i+1, n, want, clockWarnEvery)
		}
	}
	if n := cs.reads.Load(); n != 11 {
		t.Fatalf("%d reads of the database's clock over ten minutes; want 11", n)
	}

	// Synchronized: the clock is set to the machine's (forward) and
	// compared at its next check.
	fc.SetTime(time.Now().Add(100 * time.Millisecond))
	svc.checkClockIfDue(ctx)
	if offset, _ := svc.ClockOffset(); offset.Abs() > vdibroker.ClockTolerance || logs.count(within) != 1 {
		t.Fatalf("the clock set right: offset %s, %d lines saying it is within again; want within %s, 1", offset, logs.count(within), vdibroker.ClockTolerance)
	}
	if _, off := svc.ClockOff(); off {
		t.Fatal("ClockOff says off after the clock was set right")
	}
	// Set back a minute: compared at once, off.
	fc.SetTime(fc.Now().Add(-time.Minute))
	svc.checkClockIfDue(ctx)
	if offset, _ := svc.ClockOffset(); offset > -time.Minute+vdibroker.ClockTolerance || logs.count(warning) != 3 {
		t.Fatalf("the clock set back a minute: offset %s, %d warnings; want about -1m, 3", offset, logs.count(warning))
	}
}

// TestClockCheckedByTheMaintenanceLoop: the loop's first tick compares
// the clocks.
func TestClockCheckedByTheMaintenanceLoop(t *testing.T) {
	ctx := t.Context()
	st, err := store.OpenWith(ctx, "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const interval = 5 * time.Second
	fc := clocktesting.NewFakeClock(time.Now().Add(time.Hour))
	ended := make(chan struct{}, 16)
	svc := New(Config{Store: st, Clock: fc, MaintenanceInterval: interval, AfterTick: func() { ended <- struct{}{} }})
	t.Cleanup(func() { svc.Close() })
	fc.Step(interval) // New made the loop's ticker before it returned
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the clock stepped a maintenance interval, yet no tick ended")
	}
	if offset, ok := svc.ClockOffset(); !ok || offset < 59*time.Minute {
		t.Fatalf("after the first tick, a clock an hour ahead: offset %s (measured %v); want about 1h", offset, ok)
	}
}

// TestClockCheckSlowReading: a reading whose call took too long to tell
// within from off (a slow store) changes nothing: a clock off stays off,
// without a line saying it is within again (and a warning anew at the
// next prompt reading), and the offset is the last that could tell; the
// next tick reads again.
func TestClockCheckSlowReading(t *testing.T) {
	ctx := t.Context()
	st, err := store.OpenWith(ctx, "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cs := &clockStore{Store: st}
	var logs logLines
	fc := clocktesting.NewFakeClock(time.Now().Add(-100 * time.Second))
	svc := New(Config{Store: cs, Clock: fc, MaintenanceInterval: 24 * time.Hour, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	t.Cleanup(func() { svc.Close() })
	const warning, within = "clock is off the database server's", "within the tolerance of the database server's again"

	svc.checkClockIfDue(ctx)
	first, _ := svc.ClockOffset()
	if _, off := svc.ClockOff(); !off || logs.count(warning) != 1 {
		t.Fatalf("a clock 100 s behind: off %v, %d warnings; want off, 1", off, logs.count(warning))
	}
	// Set 0.2 s ahead (more than a minute on: compared at once) and read
	// in a call of 1.2 s: about 0.8 s ± 0.6 s, neither surely beyond 0.5 s
	// nor surely within.
	fc.SetTime(time.Now().Add(200 * time.Millisecond))
	cs.during = func() { fc.Step(1200 * time.Millisecond) }
	svc.checkClockIfDue(ctx)
	if offset, off := svc.ClockOff(); !off || offset != first || logs.count(within) != 0 {
		t.Fatalf("an uncertain reading of a clock off: ClockOff %s, %v, %d lines saying within; want %s, off, none", offset, off, logs.count(within), first)
	}
	// Tried again at the next tick, not a minute on.
	svc.checkClockIfDue(ctx)
	if n := cs.reads.Load(); n != 3 {
		t.Fatalf("%d reads after an uncertain one; want 3 (the next tick reads again)", n)
	}
	// Set right (back: compared at once) and read promptly: within again.
	cs.during = nil
	fc.SetTime(time.Now())
	svc.checkClockIfDue(ctx)
	if _, off := svc.ClockOff(); off || logs.count(within) != 1 || logs.count(warning) != 1 {
		t.Fatalf("a prompt reading of the clock set right: off %v, %d lines saying within, %d warnings; want within, 1, 1", off, logs.count(within), logs.count(warning))
	}
}
