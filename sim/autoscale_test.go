package sim

import (
	"bytes"
	"strings"
	"testing"
)

// TestGoldenWorkdayAutoscale: the workday with a scaling plan: its table
// (with the plan's columns) is a golden file, and the plan powers fewer
// host-hours than always-on, places everyone, and stops what it started
// (R-A1..R-A3).
func TestGoldenWorkdayAutoscale(t *testing.T) {
	data, err := Example("workday-autoscale")
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, parse(t, string(data)))
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	golden(t, "workday-autoscale.table.golden", table.Bytes())
	for _, r := range rep.Results {
		a := r.Autoscale
		if a == nil {
			t.Fatalf("%s: no autoscale figures", r.Algorithm)
		}
		if a.AlwaysOnHostHours != 40*24 {
			t.Errorf("%s: always-on %v host-hours, want 960 (40 hosts × 24 h)", r.Algorithm, a.AlwaysOnHostHours)
		}
		// Powered hours are at least the hours hosts carried sessions, and
		// well under always-on.
		if a.PoweredHostHours < r.HostHours || a.PoweredHostHours > a.AlwaysOnHostHours/2 {
			t.Errorf("%s: powered %v host-hours (busy %v, always-on %v)", r.Algorithm, a.PoweredHostHours, r.HostHours, a.AlwaysOnHostHours)
		}
		if r.Rejected != 0 || r.LimitViolations != 0 || a.Starts == 0 || a.Stops == 0 || a.Evaluations != 24*60 {
			t.Errorf("%s: rejected %d, violations %d, starts %d, stops %d, evaluations %d", r.Algorithm, r.Rejected, r.LimitViolations, a.Starts, a.Stops, a.Evaluations)
		}
	}
	js, err := rep.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js, []byte(`"poweredHostHours"`)) || !bytes.Contains(js, []byte(`"logonsWaitedForStart"`)) {
		t.Error("report.json lacks the autoscale figures")
	}
}

// plannedStorm is a storm on a pool the plan keeps small: 4 hosts of 5
// sessions, ramp-up minimum 25% (1 host), threshold 100%, so logons beyond
// the running capacity wait for a host to start (start on connect).
const plannedStorm = `duration: 2h
autoscaleInterval: 1m
pool: {hosts: 4, maxSessionLimit: 5, startDelay: 3m}
algorithms: [DepthFirst]
users:
  - {pattern: storm, count: 12, start: 10m, over: 0s}
session: {meanMinutes: 600}
scalingPlan:
  timeZone: UTC
  schedules:
    - {name: all, daysOfWeek: [Monday], rampUpStartTime: "07:00", rampUpMinimumHostsPct: 25, rampUpCapacityThresholdPct: 100,
       peakStartTime: "12:00", rampDownStartTime: "18:00", rampDownCapacityThresholdPct: 100, offPeakStartTime: "22:00"}
`

// TestLogonsWaitForAStart: 12 users at once on 1 running host of 5: 7 wait;
// the first waiting logon starts a host, the others wait for it rather
// than each starting one; those it cannot take start the next. Nobody is
// rejected, and every host that started is counted. Without the plan
// (always on) nobody waits.
func TestLogonsWaitForAStart(t *testing.T) {
	rep := run(t, parse(t, plannedStorm))
	r := rep.Results[0]
	a := r.Autoscale
	if r.Placed != 12 || r.Rejected != 0 {
		t.Fatalf("placed %d rejected %d, want 12 and 0", r.Placed, r.Rejected)
	}
	// 12 sessions need ceil(12/5) = 3 hosts: 2 started (the first ran).
	if a.LogonsWaitedForStart != 7 || a.Starts != 2 || a.Stops != 0 {
		t.Errorf("waited %d, starts %d, stops %d; want 7, 2, 0", a.LogonsWaitedForStart, a.Starts, a.Stops)
	}
	// Powered: host 1 for 2 h; host 2 started at 10m by the first waiting
	// logon; the 6 others wait for it (no second start for the same
	// demand); at 13m it takes 5, and the 2 left start host 3: 2 + 1h50m
	// + 1h47m = 5.6167 h.
	if a.PoweredHostHours != 5.62 {
		t.Errorf("powered %v host-hours, want 5.62", a.PoweredHostHours)
	}
	alwaysOn := run(t, parse(t, strings.SplitN(plannedStorm, "scalingPlan:", 2)[0]))
	if alwaysOn.Results[0].Autoscale != nil || alwaysOn.Results[0].Placed != 12 {
		t.Errorf("always-on: %+v", alwaysOn.Results[0])
	}
}

// TestScalingPlanErrors: the plan is checked as the API checks it
// (ScalingPlan.Validate, R-SP1..R-SP3), errors named by field.
func TestScalingPlanErrors(t *testing.T) {
	base := "pool: {hosts: 2}\nusers:\n  - {pattern: storm, count: 1}\n"
	tests := []struct{ name, plan, want string }{
		{"unknown field", "scalingPlan: {timeZone: UTC, bogus: 1}\n", `scalingPlan: unknown field "bogus"`},
		{"bad zone", "scalingPlan: {timeZone: Mars/Base, schedules: []}\n", `scalingPlan.timeZone: must be an IANA time zone such as Europe/Berlin or UTC, or a Windows time zone such as W. Europe Standard Time, got "Mars/Base"`},
		{"threshold 0", "scalingPlan:\n  timeZone: UTC\n  schedules:\n    - {name: s, daysOfWeek: [Monday], rampUpStartTime: \"07:00\", peakStartTime: \"09:00\", rampDownStartTime: \"17:00\", offPeakStartTime: \"20:00\", rampUpCapacityThresholdPct: 0, rampDownCapacityThresholdPct: 90}\n",
			"scalingPlan.schedules[0].rampUpCapacityThresholdPct: must be 1..100, got 0"},
		{"bad time", "scalingPlan:\n  timeZone: UTC\n  schedules:\n    - {name: s, daysOfWeek: [Monday], rampUpStartTime: \"7h\", peakStartTime: \"09:00\", rampDownStartTime: \"17:00\", offPeakStartTime: \"20:00\", rampUpCapacityThresholdPct: 60, rampDownCapacityThresholdPct: 90}\n",
			`scalingPlan.schedules[0].rampUpStartTime: must be HH:MM, 00:00..23:59, got "7h"`},
		{"bad day", "scalingPlan:\n  timeZone: UTC\n  schedules:\n    - {name: s, daysOfWeek: [Montag], rampUpStartTime: \"07:00\", peakStartTime: \"09:00\", rampDownStartTime: \"17:00\", offPeakStartTime: \"20:00\", rampUpCapacityThresholdPct: 60, rampDownCapacityThresholdPct: 90}\n",
			`scalingPlan.schedules[0].daysOfWeek: must be days of Monday, Tuesday`},
		{"no schedule", "scalingPlan: {timeZone: UTC}\n", "scalingPlan.schedules: must hold 1..7 schedules, got none"},
		{"personal", "scalingPlan: {timeZone: UTC, hostPoolType: Personal, schedules: [{name: s, daysOfWeek: [Monday], rampUpStartTime: \"07:00\", peakStartTime: \"09:00\", rampDownStartTime: \"17:00\", offPeakStartTime: \"20:00\"}]}\n",
			"scalingPlan.hostPoolType: the simulator's pool is Pooled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("s.yaml", []byte(base+tt.plan))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := Parse("s.yaml", []byte("pool: {hosts: 2, startDelay: 2h}\nusers:\n  - {pattern: storm, count: 1}\n")); err == nil || !strings.Contains(err.Error(), "pool.startDelay: must be a duration 0s..1h") {
		t.Errorf("startDelay 2h: %v", err)
	}
}
