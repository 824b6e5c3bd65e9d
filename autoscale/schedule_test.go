package autoscale

import (
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

func weekdays() vdibroker.ScalingSchedule {
	return vdibroker.ScalingSchedule{
		Name:            "weekdays",
		DaysOfWeek:      []string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday"},
		RampUpStartTime: "07:00", PeakStartTime: "09:00", RampDownStartTime: "18:00", OffPeakStartTime: "20:00",
		RampUpCapacityThresholdPct: 60, RampDownCapacityThresholdPct: 90, RampDownStopHostsWhen: vdibroker.StopWhenZeroSessions,
	}
}

func at(t *testing.T, loc *time.Location, s string) time.Time {
	t.Helper()
	v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPhaseAt: the schedule and phase at an instant in the plan's zone
// (SPEC §8), over midnight and the weekend.
func TestPhaseAt(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	night := weekdays()
	night.Name = "night"
	// Ramp-down 22:00, off-peak 01:00 the next day.
	night.RampUpStartTime, night.PeakStartTime, night.RampDownStartTime, night.OffPeakStartTime = "06:00", "08:00", "22:00", "01:00"
	// R-SP1's night shift: ramp-up 20:00, peak 22:00, ramp-down 05:00 and
	// off-peak 07:00 the next morning.
	shift := weekdays()
	shift.Name = "shift"
	shift.RampUpStartTime, shift.PeakStartTime, shift.RampDownStartTime, shift.OffPeakStartTime = "20:00", "22:00", "05:00", "07:00"
	weekend := weekdays()
	weekend.Name, weekend.DaysOfWeek = "weekend", []string{"Saturday", "Sunday"}
	weekend.RampUpStartTime, weekend.PeakStartTime, weekend.RampDownStartTime, weekend.OffPeakStartTime = "10:00", "11:00", "15:00", "16:00"
	tests := []struct {
		name      string
		schedules []vdibroker.ScalingSchedule
		local     string // Europe/Berlin; 2026-11-30 is a Monday
		schedule  string
		phase     string
		day       string
	}{
		{"Monday 08:00 ramp-up", []vdibroker.ScalingSchedule{weekdays()}, "2026-11-30 08:00", "weekdays", vdibroker.PhaseRampUp, "2026-11-30"},
		{"ramp-up starts on the minute", []vdibroker.ScalingSchedule{weekdays()}, "2026-11-30 07:00", "weekdays", vdibroker.PhaseRampUp, "2026-11-30"},
		{"Monday 12:00 peak", []vdibroker.ScalingSchedule{weekdays()}, "2026-11-30 12:00", "weekdays", vdibroker.PhasePeak, "2026-11-30"},
		{"Monday 19:59 ramp-down", []vdibroker.ScalingSchedule{weekdays()}, "2026-11-30 19:59", "weekdays", vdibroker.PhaseRampDown, "2026-11-30"},
		{"Monday 23:00 off-peak", []vdibroker.ScalingSchedule{weekdays()}, "2026-11-30 23:00", "weekdays", vdibroker.PhaseOffPeak, "2026-11-30"},
		// Tuesday 03:00 is before Tuesday's ramp-up: Monday's off-peak.
		{"Tuesday 03:00 is Monday's off-peak", []vdibroker.ScalingSchedule{weekdays()}, "2026-12-01 03:00", "weekdays", vdibroker.PhaseOffPeak, "2026-11-30"},
		// Ramp-down from 22:00 runs past midnight to off-peak at 01:00.
		{"00:30 is the day before's ramp-down", []vdibroker.ScalingSchedule{night}, "2026-12-01 00:30", "night", vdibroker.PhaseRampDown, "2026-11-30"},
		{"01:30 is the day before's off-peak", []vdibroker.ScalingSchedule{night}, "2026-12-01 01:30", "night", vdibroker.PhaseOffPeak, "2026-11-30"},
		{"night shift: Tuesday 03:00 is Monday's peak", []vdibroker.ScalingSchedule{shift}, "2026-12-01 03:00", "shift", vdibroker.PhasePeak, "2026-11-30"},
		{"night shift: Tuesday 06:00 is Monday's ramp-down", []vdibroker.ScalingSchedule{shift}, "2026-12-01 06:00", "shift", vdibroker.PhaseRampDown, "2026-11-30"},
		{"night shift: Tuesday 12:00 is Monday's off-peak", []vdibroker.ScalingSchedule{shift}, "2026-12-01 12:00", "shift", vdibroker.PhaseOffPeak, "2026-11-30"},
		{"night shift: Tuesday 21:00 is Tuesday's ramp-up", []vdibroker.ScalingSchedule{shift}, "2026-12-01 21:00", "shift", vdibroker.PhaseRampUp, "2026-12-01"},
		// Monday 03:00: the last ramp-up was Friday's (no weekend schedule).
		{"Monday 03:00 is Friday's off-peak", []vdibroker.ScalingSchedule{weekdays()}, "2026-11-30 03:00", "weekdays", vdibroker.PhaseOffPeak, "2026-11-27"},
		{"Sunday noon without a weekend schedule", []vdibroker.ScalingSchedule{weekdays()}, "2026-11-29 12:00", "weekdays", vdibroker.PhaseOffPeak, "2026-11-27"},
		{"Sunday noon with one", []vdibroker.ScalingSchedule{weekdays(), weekend}, "2026-11-29 12:00", "weekend", vdibroker.PhasePeak, "2026-11-29"},
		{"Saturday 09:00 is Friday's off-peak", []vdibroker.ScalingSchedule{weekdays(), weekend}, "2026-11-28 09:00", "weekdays", vdibroker.PhaseOffPeak, "2026-11-27"},
		{"Monday 06:00 is Sunday's off-peak", []vdibroker.ScalingSchedule{weekdays(), weekend}, "2026-11-30 06:00", "weekend", vdibroker.PhaseOffPeak, "2026-11-29"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := &vdibroker.ScalingPlan{Name: "p", TimeZone: "Europe/Berlin", Schedules: tt.schedules}
			w, ok, err := PhaseAt(plan, at(t, berlin, tt.local))
			if err != nil || !ok {
				t.Fatalf("PhaseAt: ok=%v err=%v", ok, err)
			}
			if w.Schedule.Name != tt.schedule || w.Phase != tt.phase || w.Day.Format("2006-01-02") != tt.day {
				t.Errorf("got %s %s of %s, want %s %s of %s", w.Schedule.Name, w.Phase, w.Day.Format("2006-01-02"), tt.schedule, tt.phase, tt.day)
			}
		})
	}
	if _, ok, _ := PhaseAt(&vdibroker.ScalingPlan{TimeZone: "UTC"}, time.Now()); ok {
		t.Error("a plan without schedules has a phase")
	}
	if _, _, err := PhaseAt(&vdibroker.ScalingPlan{TimeZone: "Mars/Olympus"}, time.Now()); err == nil {
		t.Error("an unknown time zone is no error")
	}
}

// TestPhaseAtDaylightSaving: a start time the clock skips begins at the
// jump; one it shows twice begins at its first occurrence (PhaseAt).
func TestPhaseAtDaylightSaving(t *testing.T) {
	// Europe/Berlin 2026: 29 March 02:00 CET -> 03:00 CEST; 25 October
	// 03:00 CEST -> 02:00 CET. America/New_York 2026: 8 March 02:00 EST ->
	// 03:00 EDT; 1 November 02:00 EDT -> 01:00 EST. All Sundays.
	sc := weekdays()
	sc.DaysOfWeek = []string{"Sunday"}
	tests := []struct {
		name, zone, clock string // clock: off-peak start on that Sunday
		date              string
		utcStart          string // when off-peak begins, UTC
	}{
		// 02:30 does not exist in Berlin on 29 March: the jump, 01:00 UTC.
		{"Berlin, skipped 02:30", "Europe/Berlin", "02:30", "2026-03-29", "2026-03-29T01:00:00Z"},
		// 03:30 exists (CEST, +2).
		{"Berlin, after the jump", "Europe/Berlin", "03:30", "2026-03-29", "2026-03-29T01:30:00Z"},
		// 02:30 happens twice on 25 October: first at 00:30 UTC (CEST).
		{"Berlin, doubled 02:30", "Europe/Berlin", "02:30", "2026-10-25", "2026-10-25T00:30:00Z"},
		{"New York, skipped 02:15", "America/New_York", "02:15", "2026-03-08", "2026-03-08T07:00:00Z"},
		// 01:30 twice on 1 November: first at 05:30 UTC (EDT, -4).
		{"New York, doubled 01:30", "America/New_York", "01:30", "2026-11-01", "2026-11-01T05:30:00Z"},
		// A plan in AVD's Windows names is evaluated in CLDR's zones for
		// them: W. Europe Standard Time is Europe/Berlin, Eastern Standard
		// Time America/New_York, with the same jumps.
		{"W. Europe Standard Time, skipped 02:30", "W. Europe Standard Time", "02:30", "2026-03-29", "2026-03-29T01:00:00Z"},
		{"W. Europe Standard Time, doubled 02:30", "W. Europe Standard Time", "02:30", "2026-10-25", "2026-10-25T00:30:00Z"},
		{"Eastern Standard Time, doubled 01:30", "Eastern Standard Time", "01:30", "2026-11-01", "2026-11-01T05:30:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc, err := vdibroker.LoadTimeZone(tt.zone)
			if err != nil {
				t.Fatal(err)
			}
			s := sc
			// Ramp-up on Saturday evening is not possible with one day; use
			// a schedule that ramps up just after midnight on Sunday.
			s.RampUpStartTime, s.PeakStartTime, s.RampDownStartTime, s.OffPeakStartTime = "00:00", "00:05", "00:10", tt.clock
			plan := &vdibroker.ScalingPlan{Name: "dst", TimeZone: tt.zone, Schedules: []vdibroker.ScalingSchedule{s}}
			want, _ := time.Parse(time.RFC3339, tt.utcStart)
			for _, c := range []struct {
				at    time.Time
				phase string
			}{{want.Add(-time.Minute), vdibroker.PhaseRampDown}, {want, vdibroker.PhaseOffPeak}} {
				w, ok, err := PhaseAt(plan, c.at)
				if err != nil || !ok {
					t.Fatal(ok, err)
				}
				if w.Phase != c.phase {
					t.Errorf("at %s (%s) phase %s, want %s", c.at.UTC().Format(time.RFC3339), c.at.In(loc).Format("15:04 MST"), w.Phase, c.phase)
				}
			}
			w, _, _ := PhaseAt(plan, want)
			if !w.Start.Equal(want) {
				t.Errorf("off-peak starts %s, want %s", w.Start.UTC(), want)
			}
			// The second 02:30 (an hour later) is still off-peak: it does not
			// begin again.
			if w2, _, _ := PhaseAt(plan, want.Add(time.Hour)); !w2.Start.Equal(want) || w2.Phase != vdibroker.PhaseOffPeak {
				t.Errorf("an hour later: %s from %s", w2.Phase, w2.Start.UTC())
			}
			if got := w.Day.Format("2006-01-02"); got != tt.date {
				t.Errorf("schedule day %s, want %s", got, tt.date)
			}
		})
	}
}
