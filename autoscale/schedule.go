package autoscale

import (
	"fmt"
	"time"

	"github.com/vdibroker/vdibroker"
)

// Where is the schedule and phase of a plan at an instant.
type Where struct {
	Schedule *vdibroker.ScalingSchedule
	Phase    string
	// Day is the local date (midnight in the plan's zone) whose ramp-up
	// began the schedule's day: off-peak after midnight still belongs to
	// the day before.
	Day time.Time
	// Start is when the phase began; Local is the instant in the zone.
	Start, Local time.Time
}

// lookBack is how many days before an instant PhaseAt looks for the last
// ramp-up: a schedule for Mondays only covers the week until next Monday.
const lookBack = 8

// PhaseAt returns the schedule and phase of plan at now (SPEC §8). A
// schedule's day runs from its ramp-up on one of its days of the week to
// the next ramp-up of any schedule: off-peak of Monday running past
// midnight into Tuesday's ramp-up is Monday's schedule, and on a day no
// schedule names, the last day's off-peak goes on. The phases follow each
// other in the order ramp-up, peak, ramp-down, off-peak; a start time
// earlier on the clock than the one before it is on the next day.
//
// Daylight saving: a start time the clock skips (02:30 on the night it
// jumps from 02:00 to 03:00) starts at the jump, the first instant after
// it; one the clock shows twice (02:30 on the night it goes back from
// 03:00 to 02:00) starts at its first occurrence. Like cron, a phase is
// neither lost nor run twice.
//
// ok is false when no schedule has a ramp-up in the week before now (a
// plan without schedules).
func PhaseAt(plan *vdibroker.ScalingPlan, now time.Time) (w Where, ok bool, err error) {
	loc, err := vdibroker.LoadTimeZone(plan.TimeZone)
	if err != nil {
		return Where{}, false, fmt.Errorf("scaling plan %q: time zone %q: %w", plan.Name, plan.TimeZone, err)
	}
	local := now.In(loc)
	today := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, loc)
	for back := 0; back <= lookBack; back++ {
		day := today.AddDate(0, 0, -back)
		var best *vdibroker.ScalingSchedule
		var bestPhases [4]time.Time
		for i := range plan.Schedules {
			sc := &plan.Schedules[i]
			if !hasDay(sc, day.Weekday()) {
				continue
			}
			phases, err := phaseStarts(sc, day, loc)
			if err != nil {
				return Where{}, false, fmt.Errorf("scaling plan %q schedule %q: %w", plan.Name, sc.Name, err)
			}
			if phases[0].After(now) {
				continue // this day's ramp-up is still to come
			}
			// Two schedules on one day are refused by validation; the
			// later ramp-up wins if they are not.
			if best == nil || phases[0].After(bestPhases[0]) {
				best, bestPhases = sc, phases
			}
		}
		if best == nil {
			continue
		}
		i := 0
		for j := 1; j < 4; j++ {
			if !bestPhases[j].After(now) {
				i = j
			}
		}
		return Where{Schedule: best, Phase: phaseNames[i], Day: day, Start: bestPhases[i], Local: local}, true, nil
	}
	return Where{}, false, nil
}

var phaseNames = [4]string{vdibroker.PhaseRampUp, vdibroker.PhasePeak, vdibroker.PhaseRampDown, vdibroker.PhaseOffPeak}

// phaseStarts returns the instants the four phases of sc begin on the
// schedule day day: each is the first occurrence of its clock time at or
// after the one before (ramp-up on day itself).
func phaseStarts(sc *vdibroker.ScalingSchedule, day time.Time, loc *time.Location) ([4]time.Time, error) {
	var out [4]time.Time
	clocks := [4]string{sc.RampUpStartTime, sc.PeakStartTime, sc.RampDownStartTime, sc.OffPeakStartTime}
	prevMin := -1
	d := day
	for i, c := range clocks {
		h, m, err := parseClock(c)
		if err != nil {
			return out, fmt.Errorf("%s start time: %w", phaseNames[i], err)
		}
		if h*60+m < prevMin {
			d = d.AddDate(0, 0, 1) // after midnight
		}
		prevMin = h*60 + m
		out[i] = LocalInstant(d.Year(), d.Month(), d.Day(), h, m, loc)
	}
	return out, nil
}

// parseClock parses "HH:MM".
func parseClock(s string) (h, m int, err error) {
	t, err := time.Parse("15:04", s)
	if err != nil {
		return 0, 0, fmt.Errorf("%q is not a time HH:MM", s)
	}
	return t.Hour(), t.Minute(), nil
}

func hasDay(sc *vdibroker.ScalingSchedule, wd time.Weekday) bool {
	for _, d := range sc.DaysOfWeek {
		if d == wd.String() {
			return true
		}
	}
	return false
}

// LocalInstant is the instant the clock of loc shows y-mo-d h:mi: for a
// clock time skipped by a daylight-saving jump the instant of the jump,
// for one shown twice the first (see PhaseAt).
func LocalInstant(y int, mo time.Month, d, h, mi int, loc *time.Location) time.Time {
	t := time.Date(y, mo, d, h, mi, 0, 0, loc)
	want := time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
	if wall(t) != want {
		// Skipped: time.Date moved it by the gap, to one side of the jump.
		start, end := t.ZoneBounds()
		if wall(t).After(want) {
			return start
		}
		return end
	}
	// Shown twice: the same clock time an offset change earlier is the
	// first occurrence.
	if start, _ := t.ZoneBounds(); !start.IsZero() {
		_, off := t.Zone()
		_, prevOff := start.Add(-time.Nanosecond).Zone()
		if prevOff > off {
			if earlier := t.Add(-time.Duration(prevOff-off) * time.Second); earlier.Before(start) && wall(earlier) == want {
				return earlier
			}
		}
	}
	return t
}

// wall is t's clock reading as a UTC time, to compare clock readings.
func wall(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}
