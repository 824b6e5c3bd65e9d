package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// TestScalingPlanFlagsFollowTheSchema: every schedule setting of the plan
// schema has a flag on create and update whose help says its range, and
// create's int defaults are the schema's.
func TestScalingPlanFlagsFollowTheSchema(t *testing.T) {
	root := newScalingPlanCmd()
	for _, sub := range []string{"create", "update"} {
		cmd, _, err := root.Find([]string{sub})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range vdibroker.PlanFields() {
			fl := cmd.Flags().Lookup(scheduleFlag(f))
			if fl == nil {
				t.Errorf("%s: no flag for %s (want --%s)", sub, f.Path, scheduleFlag(f))
				continue
			}
			if f.Kind != vdibroker.KindBool && f.Kind != vdibroker.KindEnum && !strings.Contains(fl.Usage, f.Range()) {
				t.Errorf("%s --%s usage %q lacks the range %q", sub, fl.Name, fl.Usage, f.Range())
			}
			if sub == "create" && f.Kind == vdibroker.KindInt && f.Default != nil && fl.DefValue != f.DefaultText(vdibroker.Pooled) {
				t.Errorf("create --%s default %q, want %q", fl.Name, fl.DefValue, f.DefaultText(vdibroker.Pooled))
			}
		}
	}
	if got := scheduleFlag(mustPlanField(t, "rampUpCapacityThresholdPct")); got != "ramp-up-capacity-threshold-pct" {
		t.Errorf("flag of rampUpCapacityThresholdPct: %q", got)
	}
}

func mustPlanField(t *testing.T, path string) vdibroker.PlanField {
	f, ok := vdibroker.PlanFieldAt(path)
	if !ok {
		t.Fatalf("no plan field %s", path)
	}
	return f
}

// TestScalingPlanCLI drives scalingplan create, show, list, update and
// delete against a real broker on loopback: one schedule from flags with
// the schema's defaults, a schedule changed by name, schedules replaced
// from a YAML file, and refusals from flag parsing (exit 2) and from the
// broker (exit 1, its message).
func TestScalingPlanCLI(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "office")
	b.ok("hostpool", "create", "--name", "lab")
	b.ok("scalingplan", "create", "--name", "weekdays", "--time-zone", "Europe/Berlin", "--host-pools", "office",
		"--schedule-name", "workweek", "--days-of-week", "Monday,Tuesday,Wednesday,Thursday,Friday",
		"--ramp-up-start-time", "07:00", "--peak-start-time", "09:00", "--ramp-down-start-time", "17:00", "--off-peak-start-time", "19:00",
		"--peak-minimum-hosts-pct", "40")
	var p vdibroker.ScalingPlan
	if err := json.Unmarshal([]byte(b.ok("scalingplan", "show", "--name", "weekdays", "--output", "json")), &p); err != nil {
		t.Fatal(err)
	}
	s := p.Schedules[0]
	// The schema's defaults: ramp-up 20 % / 60 %, ramp-down 10 % / 90 %,
	// wait 30 min; peak minimum as given.
	if p.TimeZone != "Europe/Berlin" || strings.Join(p.HostPools, ",") != "office" || s.Name != "workweek" || len(s.DaysOfWeek) != 5 ||
		s.RampUpMinimumHostsPct != 20 || s.RampUpCapacityThresholdPct != 60 || s.RampDownMinimumHostsPct != 10 ||
		s.RampDownCapacityThresholdPct != 90 || s.RampDownWaitTimeMinutes != 30 || s.PeakMinimumHostsPct == nil || *s.PeakMinimumHostsPct != 40 {
		t.Errorf("created plan: %+v", p)
	}
	table := b.ok("scalingplan", "list")
	if !strings.Contains(table, "weekdays") || !strings.Contains(table, "Europe/Berlin") || !strings.Contains(table, "workweek") {
		t.Errorf("list table:\n%s", table)
	}

	// Change one setting of the schedule; the rest stays.
	b.ok("scalingplan", "update", "--name", "weekdays", "--schedule-name", "workweek", "--ramp-down-capacity-threshold-pct", "80", "--host-pools", "office,lab")
	_ = json.Unmarshal([]byte(b.ok("scalingplan", "show", "--name", "weekdays", "-o", "json")), &p)
	if s := p.Schedules[0]; s.RampDownCapacityThresholdPct != 80 || s.RampUpCapacityThresholdPct != 60 || *s.PeakMinimumHostsPct != 40 || strings.Join(p.HostPools, ",") != "office,lab" {
		t.Errorf("after update: %+v", p)
	}

	// Schedules from a YAML file: workweek and weekend.
	file := filepath.Join(t.TempDir(), "schedules.yaml")
	yml := `
- name: workweek
  daysOfWeek: [Monday, Tuesday, Wednesday, Thursday, Friday]
  rampUpStartTime: "06:30"
  rampUpCapacityThresholdPct: 50
  peakStartTime: "08:00"
  rampDownStartTime: "18:00"
  rampDownCapacityThresholdPct: 90
  offPeakStartTime: "20:00"
- name: weekend
  daysOfWeek: [Saturday, Sunday]
  rampUpStartTime: "09:00"
  rampUpCapacityThresholdPct: 80
  peakStartTime: "10:00"
  rampDownStartTime: "15:00"
  rampDownCapacityThresholdPct: 95
  offPeakStartTime: "16:00"
`
	if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	b.ok("scalingplan", "update", "--name", "weekdays", "--schedules-file", file)
	_ = json.Unmarshal([]byte(b.ok("scalingplan", "show", "--name", "weekdays", "-o", "json")), &p)
	if len(p.Schedules) != 2 || p.Schedules[1].Name != "weekend" || p.Schedules[0].RampUpStartTime != "06:30" {
		t.Errorf("after --schedules-file: %+v", p.Schedules)
	}

	for _, c := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"threshold flag out of range", []string{"scalingplan", "create", "--name", "bad", "--time-zone", "UTC", "--ramp-up-capacity-threshold-pct", "0"}, 2, "1..100"},
		{"bad time flag", []string{"scalingplan", "create", "--name", "bad", "--time-zone", "UTC", "--peak-start-time", "9am"}, 2, "HH:MM"},
		{"no schedule", []string{"scalingplan", "create", "--name", "bad", "--time-zone", "UTC"}, 2, "needs a schedule"},
		{"times out of order", []string{"scalingplan", "create", "--name", "bad", "--time-zone", "UTC", "--days-of-week", "Monday",
			"--ramp-up-start-time", "09:00", "--peak-start-time", "08:00", "--ramp-down-start-time", "17:00", "--off-peak-start-time", "19:00"}, 1, "got 09:00, 08:00, 17:00, 19:00"},
		{"pool in another plan", []string{"scalingplan", "create", "--name", "other", "--time-zone", "UTC", "--host-pools", "lab", "--days-of-week", "Monday",
			"--ramp-up-start-time", "07:00", "--peak-start-time", "08:00", "--ramp-down-start-time", "17:00", "--off-peak-start-time", "19:00"}, 1, `already in scaling plan "weekdays"`},
		{"create existing", []string{"scalingplan", "create", "--name", "weekdays", "--time-zone", "UTC", "--schedules-file", file}, 1, "already exists"},
		{"create existing with times out of order", []string{"scalingplan", "create", "--name", "weekdays", "--time-zone", "UTC", "--days-of-week", "Monday",
			"--ramp-up-start-time", "09:00", "--peak-start-time", "08:00", "--ramp-down-start-time", "17:00", "--off-peak-start-time", "19:00"}, 1, "already exists"},
		{"update which schedule", []string{"scalingplan", "update", "--name", "weekdays", "--peak-start-time", "08:30"}, 2, "--schedule-name"},
	} {
		r := b.cli(c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d saying %q", c.name, r.code, r.stderr, c.code, c.msg)
		}
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatal(err)
	}

	b.ok("scalingplan", "delete", "--name", "weekdays")
	if r := b.cli("scalingplan", "show", "--name", "weekdays"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("show after delete: exit %d, %q", r.code, r.stderr)
	}
}

// TestScalingPlanWindowsTimeZone: a plan in AVD's Windows zone name goes
// through the CLI and the API and is kept as given; show adds the IANA
// zone its schedules are evaluated in (CLDR's, territory 001). An unknown
// name is refused by the broker naming the field.
func TestScalingPlanWindowsTimeZone(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "office")
	b.ok("scalingplan", "create", "--name", "avd", "--time-zone", "W. Europe Standard Time", "--host-pools", "office",
		"--days-of-week", "Monday", "--ramp-up-start-time", "07:00", "--peak-start-time", "09:00",
		"--ramp-down-start-time", "17:00", "--off-peak-start-time", "19:00")
	var got struct {
		TimeZone     string `json:"timeZone"`
		IANATimeZone string `json:"ianaTimeZone"`
	}
	if err := json.Unmarshal([]byte(b.ok("scalingplan", "show", "--name", "avd", "-o", "json")), &got); err != nil {
		t.Fatal(err)
	}
	if got.TimeZone != "W. Europe Standard Time" || got.IANATimeZone != "Europe/Berlin" {
		t.Errorf("show: timeZone %q, ianaTimeZone %q; want as given and Europe/Berlin", got.TimeZone, got.IANATimeZone)
	}
	if table := b.ok("scalingplan", "show", "--name", "avd"); !strings.Contains(table, "W. Europe Standard Time (Europe/Berlin)") {
		t.Errorf("show table lacks both zones:\n%s", table)
	}
	r := b.cli("scalingplan", "update", "--name", "avd", "--time-zone", "Mars Standard Time")
	if r.code != 1 || !strings.Contains(r.stderr, "timeZone") || !strings.Contains(r.stderr, "Windows time zone") {
		t.Errorf("unknown zone: exit %d, %q; want the broker's refusal naming timeZone", r.code, r.stderr)
	}
}

// TestScalingPlanEvaluationsCLI: scalingplan evaluations lists what the
// autoscaler of a real broker recorded, newest first: the
// plan's phase applies its load balancer (an action with its reason) and,
// the pool having no powerDriver, the note says nothing is started or
// stopped. --top bounds the list; a bad --top is a usage error (exit 2)
// sent nowhere; an unknown pool is the broker's NotFound (exit 1).
func TestScalingPlanEvaluationsCLI(t *testing.T) {
	m := &Main{Listen: "127.0.0.1:0", DataDir: t.TempDir(), AutoscaleInterval: 50 * time.Millisecond}
	if err := m.Open(t.Context()); err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	b := &cliBroker{tb: t, m: m}
	b.ok("hostpool", "create", "--name", "office", "--load-balancer-type", "BreadthFirst")
	args := []string{"scalingplan", "create", "--name", "allday", "--time-zone", "UTC", "--host-pools", "office",
		"--days-of-week", "Monday,Tuesday,Wednesday,Thursday,Friday,Saturday,Sunday",
		"--ramp-up-start-time", "00:00", "--peak-start-time", "06:00", "--ramp-down-start-time", "12:00", "--off-peak-start-time", "18:00"}
	for _, phase := range []string{"ramp-up", "peak", "ramp-down", "off-peak"} {
		args = append(args, "--"+phase+"-load-balancing-algorithm", "DepthFirst")
	}
	b.ok(args...)
	var list []vdibroker.AutoscaleEvaluation
	e2eEventually(t, "two evaluations", 30*time.Second, func() bool {
		list = nil
		return json.Unmarshal([]byte(b.ok("scalingplan", "evaluations", "--host-pool", "office", "--output", "json")), &list) == nil && len(list) >= 2
	})
	if list[0].Seq <= list[1].Seq {
		t.Errorf("evaluations seq %d then %d, want newest first", list[0].Seq, list[1].Seq)
	}
	first := list[len(list)-1]
	if first.Plan != "allday" || len(first.Actions) != 1 || first.Actions[0].Action != vdibroker.ActionSetLoadBalancer ||
		!strings.Contains(first.Actions[0].Reason, "DepthFirst (was BreadthFirst)") || !strings.Contains(first.Note, "no powerDriver") {
		t.Errorf("first evaluation %+v: want plan allday setting DepthFirst, with the note that the pool has no powerDriver", first)
	}
	table := b.ok("scalingplan", "evaluations", "--host-pool", "office", "--top", "100")
	for _, want := range []string{"Phase", "UsedPct", "SetLoadBalancer", "no powerDriver"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if got := b.ok("scalingplan", "evaluations", "--host-pool", "office", "--top", "1", "--query", "length(@)", "-o", "tsv"); strings.TrimSpace(got) != "1" {
		t.Errorf("--top 1 listed %q evaluations", got)
	}
	if r := b.cli("scalingplan", "evaluations", "--host-pool", "office", "--top", "0"); r.code != 2 || !strings.Contains(r.stderr, "--top: must be 1..1000") {
		t.Errorf("--top 0: exit %d %q, want a usage error naming the range", r.code, r.stderr)
	}
	if r := b.cli("scalingplan", "evaluations", "--host-pool", "nowhere"); r.code != 1 || !strings.Contains(r.stderr, "nowhere") {
		t.Errorf("unknown pool: exit %d %q, want the broker's NotFound", r.code, r.stderr)
	}
	if r := b.cli("scalingplan", "evaluations"); r.code != 2 || !strings.Contains(r.stderr, "host-pool") {
		t.Errorf("without --host-pool: exit %d %q, want a usage error", r.code, r.stderr)
	}
}
