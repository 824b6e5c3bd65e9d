package autoscale

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
)

func ptr(v int) *int { return &v }

// hosts builds hosts: running (placeable, Running) with the given session
// counts, then stopped ones.
func hosts(sessions []int, stopped int) []Host {
	var out []Host
	for i, s := range sessions {
		out = append(out, Host{Name: name(i), Placeable: true, Power: vdibroker.PowerRunning, Sessions: s, Active: s})
	}
	for i := range stopped {
		out = append(out, Host{Name: name(len(sessions) + i), Power: vdibroker.PowerStopped})
	}
	return out
}

func name(i int) string { return string(rune('a'+i/10)) + string(rune('0'+i%10)) }

func names(steps []Step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Host)
	}
	return out
}

// TestPlan: R-A1..R-A3 with worked numbers. Schedule: ramp-up threshold
// 60%, ramp-down 90%; maxSessionLimit 10 unless said.
func TestPlan(t *testing.T) {
	base := weekdays()
	with := func(f func(*vdibroker.ScalingSchedule)) *vdibroker.ScalingSchedule {
		s := base
		f(&s)
		return &s
	}
	tests := []struct {
		name     string
		phase    string
		sc       *vdibroker.ScalingSchedule
		limit    int
		hosts    []Host
		start    []string
		undrain  []string
		drain    []string
		used     float64
		avail    int
		minimum  int
		running  int
		starting int
	}{
		{
			// 2 running × 10 = 20; 13 sessions = 65% > 60%: need
			// ceil(1300/600) = 3 hosts: start one (R-A2).
			name: "ramp-up above threshold starts one", phase: vdibroker.PhaseRampUp, sc: &base, limit: 10,
			hosts: hosts([]int{7, 6}, 3), start: []string{"a2"}, used: 65, avail: 20, running: 2,
		},
		{
			// 40 sessions on 4 full hosts: 100%; need ceil(4000/600) = 7,
			// 4 running, 2 stopped: both start.
			name: "several starts in one evaluation, up to what exists", phase: vdibroker.PhasePeak, sc: &base, limit: 10,
			hosts: hosts([]int{10, 10, 10, 10}, 2), start: []string{"a4", "a5"}, used: 100, avail: 40, running: 4,
		},
		{
			// One host's agent reports 2,000 sessions (adopted, R-S2): it
			// counts as full (10), not as 2,000: 10 of 20 = 50% ≤ 60%, so
			// a made-up report starts no host.
			name: "a host counts at most its limit", phase: vdibroker.PhasePeak, sc: &base, limit: 10,
			hosts: hosts([]int{2000, 0}, 5), used: 50, avail: 20, running: 2,
		},
		{
			// A host Starting is capacity to come: 13 sessions need 3, 2
			// running + 1 starting = 3: no second start for the same demand.
			name: "starting host counts as coming capacity", phase: vdibroker.PhaseRampUp, sc: &base, limit: 10,
			hosts: append(hosts([]int{7, 6}, 2), Host{Name: "s", Power: vdibroker.PowerStarting}),
			used:  65, avail: 20, running: 2, starting: 1,
		},
		{
			// Ramp-up minimum 50% of 5 hosts = ceil(2.5) = 3, 1 running
			// and no sessions: start two.
			name: "ramp-up minimum hosts", phase: vdibroker.PhaseRampUp, sc: with(func(s *vdibroker.ScalingSchedule) { s.RampUpMinimumHostsPct = 50 }), limit: 10,
			hosts: hosts([]int{0}, 4), start: []string{"a1", "a2"}, used: 0, avail: 10, minimum: 3, running: 1,
		},
		{
			// Exactly at the threshold is not above it: 12 sessions on 2
			// hosts of 10 = 60%: need ceil(1200/600) = 2, no start (R-A2).
			name: "ramp-up at the threshold starts nothing", phase: vdibroker.PhaseRampUp, sc: &base, limit: 10,
			hosts: hosts([]int{6, 6}, 2), used: 60, avail: 20, running: 2,
		},
		{
			// Ramp-up never stops, even with 5 idle hosts.
			name: "ramp-up never stops", phase: vdibroker.PhaseRampUp, sc: &base, limit: 10,
			hosts: hosts([]int{0, 0, 0, 0, 0}, 0), used: 0, avail: 50, running: 5,
		},
		{
			// Peak minimum (ours) 40% of 5 = 2; 1 running: start one.
			name: "peak minimum", phase: vdibroker.PhasePeak, sc: with(func(s *vdibroker.ScalingSchedule) { s.PeakMinimumHostsPct = ptr(40) }), limit: 10,
			hosts: hosts([]int{1}, 4), start: []string{"a1"}, used: 10, avail: 10, minimum: 2, running: 1,
		},
		{
			// Ramp-down 90%: 4 hosts × 10 = 40, 12 sessions. Without one
			// (fewest first: 0, then 2): 3 hosts 30 -> 40% ok; 2 hosts 20 ->
			// 60% ok; 1 host 10 -> 120% > 90%: stop two in one evaluation.
			name: "ramp-down stops several, fewest sessions first", phase: vdibroker.PhaseRampDown, sc: &base, limit: 10,
			hosts: hosts([]int{5, 0, 5, 2}, 0), drain: []string{"a1", "a3"}, used: 30, avail: 40, running: 4,
		},
		{
			// The same with ramp-down minimum 75% of 4 = 3: only one.
			name: "ramp-down keeps the minimum", phase: vdibroker.PhaseRampDown, sc: with(func(s *vdibroker.ScalingSchedule) { s.RampDownMinimumHostsPct = 75 }), limit: 10,
			hosts: hosts([]int{5, 0, 5, 2}, 0), drain: []string{"a1"}, used: 30, avail: 40, minimum: 3, running: 4,
		},
		{
			// 3 hosts, 19 sessions: without one, 20 capacity, 95% > 90%:
			// nothing stops.
			name: "ramp-down keeps used under the threshold", phase: vdibroker.PhaseRampDown, sc: &base, limit: 10,
			hosts: hosts([]int{7, 6, 6}, 0), used: 63.3, avail: 30, running: 3,
		},
		{
			// Exactly at the threshold is allowed: 18 sessions on 2 hosts
			// = 90% ≤ 90%.
			name: "used equal to the threshold stops", phase: vdibroker.PhaseRampDown, sc: &base, limit: 10,
			hosts: hosts([]int{6, 6, 6}, 0), drain: []string{"a0"}, used: 60, avail: 30, running: 3,
		},
		{
			// Ramp-down above its threshold starts (R-A2 in any phase):
			// 28 sessions on 3 hosts = 93%, need ceil(2800/900) = 4.
			name: "ramp-down above threshold starts", phase: vdibroker.PhaseRampDown, sc: &base, limit: 10,
			hosts: hosts([]int{10, 9, 9}, 1), start: []string{"a3"}, used: 93.3, avail: 30, running: 3,
		},
		{
			// A host being drained is running: lifting its drain gives
			// capacity back at once, before any start.
			name: "ramp-down lifts a drain before it starts", phase: vdibroker.PhaseRampDown, sc: &base, limit: 10,
			hosts:   append(hosts([]int{10, 9, 9}, 1), Host{Name: "d", Placeable: true, Power: vdibroker.PowerRunning, AutoscaleDrained: true, Sessions: 1}),
			undrain: []string{"d"}, used: 96.7, avail: 30, running: 3,
		},
		{
			// Morning: drains left from the evening are lifted (R-A2).
			name: "ramp-up lifts every autoscale drain", phase: vdibroker.PhaseRampUp, sc: &base, limit: 10,
			hosts:   append(hosts([]int{1}, 0), Host{Name: "d", Placeable: true, Power: vdibroker.PowerRunning, AutoscaleDrained: true}),
			undrain: []string{"d"}, used: 10, avail: 10, running: 1,
		},
		{
			// Off-peak cap 25% of 8 hosts = 2: 4 running, sessions would
			// fit on 3 (need ceil(2400/900)=3), but the cap drains two.
			name: "off-peak cap drains above it", phase: vdibroker.PhaseOffPeak, sc: with(func(s *vdibroker.ScalingSchedule) { s.OffPeakMaximumHostsPct = ptr(25) }), limit: 10,
			hosts: hosts([]int{8, 8, 4, 4}, 4), drain: []string{"a2", "a3"}, used: 60, avail: 40, running: 4,
		},
		{
			// The cap also limits starts: 20 sessions on 2 full hosts
			// need ceil(2000/900) = 3, but the cap of 25% of 8 is 2, both
			// running: none starts.
			name: "off-peak cap limits starts", phase: vdibroker.PhaseOffPeak, sc: with(func(s *vdibroker.ScalingSchedule) { s.OffPeakMaximumHostsPct = ptr(25) }), limit: 10,
			hosts: hosts([]int{10, 10}, 6), used: 100, avail: 20, running: 2,
		},
		{
			// An admin-drained host is not capacity, not counted in the
			// hosts, never started, stopped or undrained; its sessions are
			// demand. 3 managed hosts: 2 running (20) + admin's (5
			// sessions) + 1 stopped. 13 sessions = 65% in ramp-down (90%):
			// without one, 10 capacity, 130%: nothing.
			name: "admin drain is left alone", phase: vdibroker.PhaseRampDown, sc: &base, limit: 10,
			hosts: append(hosts([]int{4, 4}, 1), Host{Name: "admin", Placeable: true, Power: vdibroker.PowerRunning, AdminDrained: true, Sessions: 5}),
			used:  65, avail: 20, running: 2,
		},
		{
			// A start that failed leaves the host Unknown (no heartbeat): it
			// is started again, after the Stopped ones. 13 sessions on 2
			// hosts of 10 at 60%: need 3, then the minimum 50% of 5 = 3.
			name: "unknown host started after the stopped ones", phase: vdibroker.PhaseRampUp, sc: &base, limit: 10,
			hosts: append(hosts([]int{7, 6}, 0), Host{Name: "u", Power: vdibroker.PowerUnknown}, Host{Name: "a9", Power: vdibroker.PowerStopped},
				Host{Name: "b0", Power: vdibroker.PowerStopped}),
			start: []string{"a9"}, used: 65, avail: 20, running: 2,
		},
		{
			// Only an Unknown host left: it is started.
			name: "unknown host started when no stopped one is left", phase: vdibroker.PhaseRampUp, sc: &base, limit: 10,
			hosts: append(hosts([]int{7, 6}, 0), Host{Name: "u", Power: vdibroker.PowerUnknown}),
			start: []string{"u"}, used: 65, avail: 20, running: 2,
		},
		{
			// A start that timed out is not capacity to come: another starts.
			name: "timed-out start does not hold the demand", phase: vdibroker.PhaseRampUp, sc: &base, limit: 10,
			hosts: append(hosts([]int{7, 6}, 1), Host{Name: "t", Power: PowerStartTimedOut}),
			start: []string{"a2"}, used: 65, avail: 20, running: 2,
		},
		{
			// A start whose host's agent said since that it shuts down
			// is not capacity to come either (R-A4): another starts, and
			// it is not started again. Placeable, so that the power alone
			// keeps it out (not its status).
			name: "start of a host shutting down does not hold the demand", phase: vdibroker.PhaseRampUp, sc: &base, limit: 10,
			hosts: append(hosts([]int{7, 6}, 1), Host{Name: "s", Power: PowerStartShuttingDown, Placeable: true}),
			start: []string{"a2"}, used: 65, avail: 20, running: 2,
		},
		{
			// Unavailable (no heartbeat) but powered: neither capacity nor
			// startable; 5 sessions on none: used 100%, need 1, start the
			// stopped one.
			name: "running without heartbeat is no capacity", phase: vdibroker.PhaseRampUp, sc: &base, limit: 10,
			hosts: append(hosts(nil, 1), Host{Name: "z", Power: vdibroker.PowerRunning, Sessions: 5}),
			start: []string{"a0"}, used: 100, avail: 0,
		},
		{
			// Right after the broker's restart: host z's agent has not
			// reported yet (Unheard), so the 5 sessions look like no
			// capacity (used 100%, need 1), but the stopped host is not
			// started: z may well run (R-A4).
			name: "nothing starts while a host is unheard", phase: vdibroker.PhaseRampUp, sc: &base, limit: 10,
			hosts: append(hosts(nil, 1), Host{Name: "z", Power: vdibroker.PowerUnknown, Unheard: true, Sessions: 5}),
			used:  100, avail: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Plan(Input{Phase: tt.phase, Schedule: tt.sc, MaxSessionLimit: tt.limit, Hosts: tt.hosts})
			if diff := cmp.Diff(tt.start, names(d.Start)); diff != "" {
				t.Errorf("start (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.undrain, names(d.Undrain)); diff != "" {
				t.Errorf("undrain (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.drain, names(d.Drain)); diff != "" {
				t.Errorf("drain (-want +got):\n%s", diff)
			}
			if d.UsedPct != tt.used || d.Available != tt.avail || d.MinimumHosts != tt.minimum || d.Running != tt.running || d.Starting != tt.starting {
				t.Errorf("figures: used %v avail %d min %d running %d starting %d; want %v %d %d %d %d",
					d.UsedPct, d.Available, d.MinimumHosts, d.Running, d.Starting, tt.used, tt.avail, tt.minimum, tt.running, tt.starting)
			}
			for _, s := range append(append(d.Start, d.Undrain...), d.Drain...) {
				if s.Reason == "" {
					t.Errorf("step %s without a reason", s.Host)
				}
			}
			if len(d.Start)+len(d.Undrain)+len(d.Drain) == 0 && d.Note == "" {
				t.Error("nothing done and no note saying why")
			}
		})
	}
}
