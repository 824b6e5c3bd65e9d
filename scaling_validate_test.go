package vdibroker

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// validPlan is a Pooled plan that passes Validate: weekdays 07:00, 09:00,
// 17:00, 19:00 in Berlin.
func validPlan() *ScalingPlan {
	p := &ScalingPlan{Name: "weekdays", TimeZone: "Europe/Berlin", HostPools: []string{"pool01"},
		Schedules: []ScalingSchedule{{
			Name: "workweek", DaysOfWeek: []string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday"},
			RampUpStartTime: "07:00", RampUpMinimumHostsPct: 20, RampUpCapacityThresholdPct: 60,
			PeakStartTime:     "09:00",
			RampDownStartTime: "17:00", RampDownMinimumHostsPct: 10, RampDownCapacityThresholdPct: 90, RampDownWaitTimeMinutes: 30,
			OffPeakStartTime: "19:00",
		}}}
	p.FillDefaults()
	return p
}

func intp(n int) *int { return &n }

// TestScalingPlanValidate_RSP1 is the table of R-SP1..R-SP3: each case
// changes one thing of a valid plan and names the field the error must
// name and a piece of its message (the allowed range), or "" for accepted.
func TestScalingPlanValidate_RSP1(t *testing.T) {
	s0 := "schedules[0]."
	for _, tc := range []struct {
		name      string
		change    func(p *ScalingPlan)
		wantField string
		wantMsg   string
	}{
		{name: "valid", change: func(p *ScalingPlan) {}},
		{name: "name too short", change: func(p *ScalingPlan) { p.Name = "ab" }, wantField: "name", wantMsg: "3..64"},
		{name: "name bad char", change: func(p *ScalingPlan) { p.Name = "plan/1" }, wantField: "name", wantMsg: "A-Za-z0-9"},
		{name: "time zone missing", change: func(p *ScalingPlan) { p.TimeZone = "" }, wantField: "timeZone", wantMsg: "IANA"},
		{name: "time zone unknown", change: func(p *ScalingPlan) { p.TimeZone = "Mars/Olympus" }, wantField: "timeZone", wantMsg: "IANA"},
		{name: "time zone Local", change: func(p *ScalingPlan) { p.TimeZone = "Local" }, wantField: "timeZone", wantMsg: "not Local"},
		{name: "time zone UTC", change: func(p *ScalingPlan) { p.TimeZone = "UTC" }},
		{name: "time zone Windows", change: func(p *ScalingPlan) { p.TimeZone = "W. Europe Standard Time" }},
		{name: "time zone Windows unknown", change: func(p *ScalingPlan) { p.TimeZone = "Mars Standard Time" }, wantField: "timeZone", wantMsg: "Windows time zone"},
		{name: "time zone Windows case", change: func(p *ScalingPlan) { p.TimeZone = "w. europe standard time" }, wantField: "timeZone", wantMsg: `did you mean "W. Europe Standard Time"`},
		{name: "time zone path", change: func(p *ScalingPlan) { p.TimeZone = "../../etc/passwd" }, wantField: "timeZone"},
		{name: "pool type unknown", change: func(p *ScalingPlan) { p.HostPoolType = "Shared" }, wantField: "hostPoolType", wantMsg: "Pooled, Personal"},
		{name: "pool listed twice", change: func(p *ScalingPlan) { p.HostPools = []string{"pool01", "pool01"} }, wantField: "hostPools", wantMsg: "twice"},
		{name: "pool name bad", change: func(p *ScalingPlan) { p.HostPools = []string{"x"} }, wantField: "hostPools[0]", wantMsg: "3..64"},
		// R-SP4, R-SP5: a bound on the pools a write checks and locks,
		// which a token scoped to one pool may send.
		{name: "most pools", change: func(p *ScalingPlan) { p.HostPools = manyPools(MaxPlanHostPools) }},
		{name: "too many pools", change: func(p *ScalingPlan) { p.HostPools = manyPools(MaxPlanHostPools + 1) }, wantField: "hostPools", wantMsg: "0..1000 host pools, got 1001"},
		{name: "no pools is allowed", change: func(p *ScalingPlan) { p.HostPools = nil }},
		{name: "no schedules", change: func(p *ScalingPlan) { p.Schedules = nil }, wantField: "schedules", wantMsg: "1..7"},
		{name: "schedule name empty", change: func(p *ScalingPlan) { p.Schedules[0].Name = "" }, wantField: s0 + "name", wantMsg: "1..64"},
		{name: "no days", change: func(p *ScalingPlan) { p.Schedules[0].DaysOfWeek = nil }, wantField: s0 + "daysOfWeek", wantMsg: "Monday"},
		{name: "bad day", change: func(p *ScalingPlan) { p.Schedules[0].DaysOfWeek = []string{"monday"} }, wantField: s0 + "daysOfWeek", wantMsg: "Sunday"},
		{name: "day twice", change: func(p *ScalingPlan) { p.Schedules[0].DaysOfWeek = []string{"Monday", "Monday"} }, wantField: s0 + "daysOfWeek", wantMsg: "twice"},
		{name: "time 24:00", change: func(p *ScalingPlan) { p.Schedules[0].RampUpStartTime = "24:00" }, wantField: s0 + "rampUpStartTime", wantMsg: "00:00..23:59"},
		{name: "time 7:00", change: func(p *ScalingPlan) { p.Schedules[0].PeakStartTime = "9:00" }, wantField: s0 + "peakStartTime", wantMsg: "HH:MM"},
		{name: "time 09:60", change: func(p *ScalingPlan) { p.Schedules[0].RampDownStartTime = "09:60" }, wantField: s0 + "rampDownStartTime"},
		{name: "time missing", change: func(p *ScalingPlan) { p.Schedules[0].OffPeakStartTime = "" }, wantField: s0 + "offPeakStartTime"},
		{name: "time 23:59 ok", change: func(p *ScalingPlan) { p.Schedules[0].OffPeakStartTime = "23:59" }},
		// Out of order within the day: peak 06:00 comes before ramp-up
		// 07:00, i.e. 23 h after it, after ramp-down's 10 h.
		{name: "peak before ramp-up", change: func(p *ScalingPlan) { p.Schedules[0].PeakStartTime = "06:00" }, wantField: s0 + "rampDownStartTime", wantMsg: "R-SP1"},
		// Ramp-down 08:00 is +1 h, before peak's +2 h.
		{name: "ramp-down before peak", change: func(p *ScalingPlan) { p.Schedules[0].RampDownStartTime = "08:00" }, wantField: s0 + "rampDownStartTime", wantMsg: "after peakStartTime 09:00"},
		{name: "equal starts", change: func(p *ScalingPlan) { p.Schedules[0].PeakStartTime = "07:00" }, wantField: s0 + "peakStartTime", wantMsg: "after rampUpStartTime 07:00"},
		// A night shift crosses midnight once: ramp-up 20:00 (0 h), peak
		// 22:00 (+2 h), ramp-down 05:00 (+9 h), off-peak 07:00 (+11 h).
		{name: "night shift over midnight", change: func(p *ScalingPlan) {
			s := &p.Schedules[0]
			s.RampUpStartTime, s.PeakStartTime, s.RampDownStartTime, s.OffPeakStartTime = "20:00", "22:00", "05:00", "07:00"
		}},
		// Off-peak after midnight: 07:00, 09:00, 17:00, 01:00 (+18 h).
		{name: "off-peak after midnight", change: func(p *ScalingPlan) { p.Schedules[0].OffPeakStartTime = "01:00" }},
		// Off-peak 08:00 is +1 h, before peak's +2 h: it would wrap twice.
		{name: "wraps twice", change: func(p *ScalingPlan) { p.Schedules[0].OffPeakStartTime = "08:00" }, wantField: s0 + "offPeakStartTime", wantMsg: "crossing midnight at most once"},
		{name: "algorithm bad", change: func(p *ScalingPlan) { p.Schedules[0].PeakLoadBalancingAlgorithm = "LoadIndex" }, wantField: s0 + "peakLoadBalancingAlgorithm", wantMsg: "BreadthFirst, DepthFirst"},
		{name: "ramp-up min 101", change: func(p *ScalingPlan) { p.Schedules[0].RampUpMinimumHostsPct = 101 }, wantField: s0 + "rampUpMinimumHostsPct", wantMsg: "0..100"},
		{name: "ramp-up min -1", change: func(p *ScalingPlan) { p.Schedules[0].RampUpMinimumHostsPct = -1 }, wantField: s0 + "rampUpMinimumHostsPct", wantMsg: "0..100"},
		{name: "ramp-up threshold 0", change: func(p *ScalingPlan) { p.Schedules[0].RampUpCapacityThresholdPct = 0 }, wantField: s0 + "rampUpCapacityThresholdPct", wantMsg: "1..100, got 0"},
		{name: "ramp-up threshold 100", change: func(p *ScalingPlan) { p.Schedules[0].RampUpCapacityThresholdPct = 100 }},
		{name: "peak min 101", change: func(p *ScalingPlan) { p.Schedules[0].PeakMinimumHostsPct = intp(101) }, wantField: s0 + "peakMinimumHostsPct", wantMsg: "0..100"},
		{name: "peak min 100", change: func(p *ScalingPlan) { p.Schedules[0].PeakMinimumHostsPct = intp(100) }},
		{name: "ramp-down min 101", change: func(p *ScalingPlan) { p.Schedules[0].RampDownMinimumHostsPct = 101 }, wantField: s0 + "rampDownMinimumHostsPct", wantMsg: "0..100"},
		{name: "ramp-down threshold 101", change: func(p *ScalingPlan) { p.Schedules[0].RampDownCapacityThresholdPct = 101 }, wantField: s0 + "rampDownCapacityThresholdPct", wantMsg: "1..100"},
		{name: "wait 1441", change: func(p *ScalingPlan) { p.Schedules[0].RampDownWaitTimeMinutes = 1441 }, wantField: s0 + "rampDownWaitTimeMinutes", wantMsg: "0..1440"},
		{name: "wait 1440", change: func(p *ScalingPlan) { p.Schedules[0].RampDownWaitTimeMinutes = 1440 }},
		{name: "message 1025", change: func(p *ScalingPlan) { p.Schedules[0].RampDownNotificationMessage = strings.Repeat("x", 1025) }, wantField: s0 + "rampDownNotificationMessage", wantMsg: "at most 1024"},
		{name: "message 1024 with lines", change: func(p *ScalingPlan) {
			p.Schedules[0].RampDownNotificationMessage = strings.Repeat("x", 1022) + "\nx"
		}},
		{name: "message control char", change: func(p *ScalingPlan) { p.Schedules[0].RampDownNotificationMessage = "bye\x07" }, wantField: s0 + "rampDownNotificationMessage"},
		{name: "stop when bad", change: func(p *ScalingPlan) { p.Schedules[0].RampDownStopHostsWhen = "Never" }, wantField: s0 + "rampDownStopHostsWhen", wantMsg: "ZeroSessions, ZeroActiveSessions"},
		{name: "off-peak max 101", change: func(p *ScalingPlan) { p.Schedules[0].OffPeakMaximumHostsPct = intp(101) }, wantField: s0 + "offPeakMaximumHostsPct", wantMsg: "0..100"},
		{name: "off-peak max 0", change: func(p *ScalingPlan) { p.Schedules[0].OffPeakMaximumHostsPct = intp(0) }},
		{name: "personal field in pooled plan", change: func(p *ScalingPlan) { p.Schedules[0].StopHostAfterLogoffMinutes = 5 }, wantField: s0 + "stopHostAfterLogoffMinutes", wantMsg: "Personal scaling plans only"},
		{name: "second schedule shares a day", change: func(p *ScalingPlan) {
			s := p.Schedules[0]
			s.Name, s.DaysOfWeek = "friday", []string{"Saturday", "Friday"}
			p.Schedules = append(p.Schedules, s)
		}, wantField: "schedules[1].daysOfWeek", wantMsg: "Friday is already in schedules[0]"},
		{name: "second schedule weekend", change: func(p *ScalingPlan) {
			s := p.Schedules[0]
			s.Name, s.DaysOfWeek = "weekend", []string{"Saturday", "Sunday"}
			p.Schedules = append(p.Schedules, s)
		}},
		{name: "schedule names unique", change: func(p *ScalingPlan) {
			s := p.Schedules[0]
			s.DaysOfWeek = []string{"Saturday"}
			p.Schedules = append(p.Schedules, s)
		}, wantField: "schedules[1].name", wantMsg: "unique"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := validPlan()
			tc.change(p)
			err := p.Validate()
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if ErrorCode(err) != EInvalid || ErrorField(err) != tc.wantField {
				t.Fatalf("got %v (field %q), want InvalidArgument naming %s", err, ErrorField(err), tc.wantField)
			}
			if !strings.Contains(ErrorMessage(err), tc.wantMsg) {
				t.Errorf("message %q does not say %q", ErrorMessage(err), tc.wantMsg)
			}
		})
	}
}

// TestPersonalPlan_RSP3: a Personal plan takes the days, the four times
// and the stop-after settings; every Pooled-only setting is refused by
// name, so an admin is not left believing a threshold acts on personal
// hosts.
func TestPersonalPlan_RSP3(t *testing.T) {
	personal := func() *ScalingPlan {
		return &ScalingPlan{Name: "personal", TimeZone: "UTC", HostPoolType: Personal, Schedules: []ScalingSchedule{{
			Name: "all", DaysOfWeek: DaysOfWeek, RampUpStartTime: "06:00", PeakStartTime: "08:00",
			RampDownStartTime: "18:00", OffPeakStartTime: "20:00",
			StopHostAfterDisconnectMinutes: 30, StopHostAfterLogoffMinutes: MaxStopHostAfterMinutes,
		}}}
	}
	p := personal()
	p.FillDefaults()
	if err := p.Validate(); err != nil {
		t.Fatalf("personal plan refused: %v", err)
	}
	if p.Schedules[0].RampUpLoadBalancingAlgorithm != "" {
		t.Errorf("FillDefaults gave a Personal plan a load balancing algorithm %q", p.Schedules[0].RampUpLoadBalancingAlgorithm)
	}
	p.Schedules[0].StopHostAfterLogoffMinutes = MaxStopHostAfterMinutes + 1
	if err := p.Validate(); ErrorField(err) != "schedules[0].stopHostAfterLogoffMinutes" || !strings.Contains(ErrorMessage(err), "0..10080") {
		t.Errorf("logoff minutes 10081: got %v", err)
	}
	for _, f := range PlanFields() {
		if f.AppliesTo(Personal) {
			continue
		}
		t.Run(f.Path, func(t *testing.T) {
			p := personal()
			s := &p.Schedules[0]
			var v any
			switch f.Kind {
			case KindInt:
				v = 5
			case KindBool:
				v = true
			case KindText:
				v = "hello"
			default:
				v = f.Values("")[0]
			}
			if err := f.Set(s, v); err != nil {
				t.Fatal(err)
			}
			err := p.Validate()
			if ErrorField(err) != "schedules[0]."+f.Path || !strings.Contains(ErrorMessage(err), "Pooled scaling plans only") {
				t.Errorf("%s set in a Personal plan: got %v", f.Path, err)
			}
		})
	}
}

// TestPlanFieldsRanges walks the schema as TestPoolFieldsRanges_RP4 does
// for pools: every int accepts Min and Max and refuses Min-1 and Max+1
// naming its schedule path and range.
func TestPlanFieldsRanges(t *testing.T) {
	for _, f := range PlanFields() {
		if f.Kind != KindInt || !f.AppliesTo(Pooled) {
			continue
		}
		t.Run(f.Path, func(t *testing.T) {
			for _, c := range []struct {
				v  int
				ok bool
			}{{int(f.Min), true}, {int(f.Max), true}, {int(f.Min) - 1, false}, {int(f.Max) + 1, false}} {
				p := validPlan()
				if err := f.Set(&p.Schedules[0], c.v); err != nil {
					t.Fatal(err)
				}
				err := p.Validate()
				if c.ok != (err == nil) {
					t.Errorf("%s = %d: got %v, want ok=%v", f.Path, c.v, err, c.ok)
				}
				if !c.ok && (ErrorField(err) != "schedules[0]."+f.Path || !strings.Contains(ErrorMessage(err), f.Range())) {
					t.Errorf("%s = %d: got %v, want field schedules[0].%s and range %s", f.Path, c.v, err, f.Path, f.Range())
				}
			}
		})
	}
}

// TestScalingPlanDefaults: an empty hostPoolType is Pooled, and the
// phases' algorithms follow AVD (breadth-first while users arrive,
// depth-first while they leave); stopHostsWhen is ZeroSessions.
func TestScalingPlanDefaults(t *testing.T) {
	p := validPlan()
	s := p.Schedules[0]
	got := []string{p.HostPoolType, s.RampUpLoadBalancingAlgorithm, s.PeakLoadBalancingAlgorithm,
		s.RampDownLoadBalancingAlgorithm, s.OffPeakLoadBalancingAlgorithm, s.RampDownStopHostsWhen}
	want := []string{Pooled, BreadthFirst, BreadthFirst, DepthFirst, DepthFirst, StopWhenZeroSessions}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("defaults: got %v, want %v", got, want)
	}
}

// FuzzScalingPlanValidate: any JSON body decoded onto a plan validates
// without panicking, and a plan Validate accepts still validates after a
// JSON round trip (what the store keeps and the API answers), with the
// same four starts in cyclic order (R-SP1).
func FuzzScalingPlanValidate(f *testing.F) {
	// Seeds: a valid plan, a night shift over midnight, a Personal plan,
	// an out-of-order cycle, bad types, and bytes that are not JSON.
	good, _ := json.Marshal(validPlan())
	f.Add(string(good))
	f.Add(`{"name":"night","timeZone":"UTC","schedules":[{"name":"n","daysOfWeek":["Sunday"],"rampUpStartTime":"20:00","peakStartTime":"22:00","rampDownStartTime":"05:00","offPeakStartTime":"07:00","rampUpCapacityThresholdPct":1,"rampDownCapacityThresholdPct":100}]}`)
	f.Add(`{"name":"desks","timeZone":"Asia/Tokyo","hostPoolType":"Personal","schedules":[{"name":"d","daysOfWeek":["Monday"],"rampUpStartTime":"00:00","peakStartTime":"00:01","rampDownStartTime":"23:58","offPeakStartTime":"23:59","stopHostAfterLogoffMinutes":10080}]}`)
	f.Add(`{"name":"bad","timeZone":"UTC","schedules":[{"rampUpStartTime":"09:00","peakStartTime":"08:00"}]}`)
	f.Add(`{"schedules":[{"peakMinimumHostsPct":-1,"daysOfWeek":[]}]}`)
	f.Add("\x00{")
	f.Fuzz(func(t *testing.T, body string) {
		var p ScalingPlan
		if json.Unmarshal([]byte(body), &p) != nil {
			return
		}
		p.FillDefaults()
		if err := p.Validate(); err != nil {
			if ErrorCode(err) != EInvalid || ErrorField(err) == "" {
				t.Fatalf("refusal without a field: %v", err)
			}
			return
		}
		b, err := json.Marshal(&p)
		if err != nil {
			t.Fatal(err)
		}
		var q ScalingPlan
		if err := json.Unmarshal(b, &q); err != nil {
			t.Fatal(err)
		}
		if err := q.Validate(); err != nil {
			t.Fatalf("accepted plan refused after a round trip: %v\n%s", err, b)
		}
		for _, s := range q.Schedules {
			st := s.StartMinutes()
			prev := 0
			for i := 1; i < 4; i++ {
				off := (st[i] - st[0] + 1440) % 1440
				if off <= prev {
					t.Fatalf("accepted starts out of cyclic order: %v", st)
				}
				prev = off
			}
		}
	})
}

// manyPools returns n distinct pool names.
func manyPools(n int) []string {
	pools := make([]string, n)
	for i := range pools {
		pools[i] = fmt.Sprintf("pool%05d", i)
	}
	return pools
}
