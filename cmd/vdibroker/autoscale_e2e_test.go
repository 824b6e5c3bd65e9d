//go:build unix

package main

// End-to-end tests of the autoscaler (R-A1..R-A3): the real binary
// serves with --power-config (the lab exec driver of e2e_lab_test.go, whose
// start runs a real agent and whose stop SIGTERMs it) and a 1 s
// --autoscale-interval; the hidden --autoscale-minute shortens the plan's
// minutes (rampDownWaitTimeMinutes) so a wait lasts seconds. Sessions are
// what a real user makes: logons the agents' session providers report,
// adopted by the broker (R-S2), and connects.

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// e2ePlanZone is an IANA zone whose clock shows 12:xx now (Etc/GMT-k is
// UTC+k), so that a schedule of whole hours around noon holds its phase
// for the test's duration whatever time it runs at.
func e2ePlanZone(now time.Time) string {
	k := 12 - now.UTC().Hour() // -11..12
	switch {
	case k == 0:
		return "Etc/GMT"
	case k > 0:
		return fmt.Sprintf("Etc/GMT-%d", k)
	default:
		return fmt.Sprintf("Etc/GMT+%d", -k)
	}
}

var e2eAllDays = []string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}

// e2eSchedule is a schedule of every day whose phases start at the given
// hours of the plan's clock (which shows 12:xx), with BreadthFirst in
// every phase (the pools' own: no load balancer change to record).
func e2eSchedule(rampUp, peak, rampDown, offPeak int) map[string]any {
	hh := func(h int) string { return fmt.Sprintf("%02d:00", h) }
	return map[string]any{
		"name": "weekdays", "daysOfWeek": e2eAllDays,
		"rampUpStartTime": hh(rampUp), "rampUpLoadBalancingAlgorithm": "BreadthFirst",
		"rampUpMinimumHostsPct": 0, "rampUpCapacityThresholdPct": 60,
		"peakStartTime": hh(peak), "peakLoadBalancingAlgorithm": "BreadthFirst",
		"rampDownStartTime": hh(rampDown), "rampDownLoadBalancingAlgorithm": "BreadthFirst",
		"rampDownMinimumHostsPct": 0, "rampDownCapacityThresholdPct": 90,
		"rampDownStopHostsWhen": "ZeroSessions",
		"offPeakStartTime":      hh(offPeak), "offPeakLoadBalancingAlgorithm": "BreadthFirst",
	}
}

// e2eAutoscale is a running broker with the lab driver and the autoscaler.
type e2eAutoscale struct {
	bin, base string
	api       e2eAPI
	lab       *e2eLab
	zone      string
}

func e2eStartAutoscale(t *testing.T) *e2eAutoscale {
	t.Helper()
	dir := t.TempDir()
	bin := e2eBuild(t, dir)
	lab := e2eNewLab(t, dir)
	const admin = "vdb_admin_e2e_autoscale_test_0123456789"
	// A plan's minute lasts 500 ms: a wait of 10 minutes is 5 s.
	_, base := e2eServeAt(t, bin, filepath.Join(dir, "broker"), admin, "127.0.0.1:0",
		"--power-config", lab.cfg, "--autoscale-interval", "1s", "--autoscale-minute", "500ms")
	lab.install(bin, base)
	return &e2eAutoscale{bin: bin, base: base, api: e2eAPI{tb: t, base: base, token: admin}, lab: lab, zone: e2ePlanZone(time.Now())}
}

// pool creates a pooled pool on the lab driver (no start on connect: what
// starts is the autoscaler's) and starts each host of running through the
// driver with the sessions its agent reports, then waits until every such
// host heartbeats with its sessions adopted (R-S2). The hosts of stopped
// are created and stopped.
func (e *e2eAutoscale) pool(t *testing.T, pool string, maxSessions int, running map[string][]vdibroker.AgentSession, stopped ...string) {
	t.Helper()
	api := e.api
	api.call("PUT", "/hostpools/"+pool, map[string]any{"hostPoolType": "Pooled", "loadBalancerType": "BreadthFirst",
		"heartbeatTimeoutSeconds": 10, "maxSessionLimit": maxSessions, "powerDriver": "lab"}, 201, nil)
	var tok struct {
		Token string `json:"token"`
	}
	api.call("POST", "/hostpools/"+pool+"/registrationtoken", map[string]any{"expiresInSeconds": 3600}, 201, &tok)
	e.lab.token(pool, tok.Token)
	for h, list := range running {
		e.lab.sessions(h, list)
		api.call("PUT", "/hostpools/"+pool+"/sessionhosts/"+h, map[string]any{"address": "127.0.0.1:3389"}, 201, nil)
		api.call("POST", "/hostpools/"+pool+"/sessionhosts/"+h+"/start", nil, 202, nil)
	}
	for _, h := range stopped {
		api.call("PUT", "/hostpools/"+pool+"/sessionhosts/"+h, map[string]any{"address": "127.0.0.1:3389"}, 201, nil)
		api.call("POST", "/hostpools/"+pool+"/sessionhosts/"+h+"/stop", nil, 202, nil)
	}
	for h, list := range running {
		e2eEventually(t, h+" running with its sessions", 60*time.Second, func() bool {
			got := api.host(pool, h)
			return got.Status == vdibroker.StatusAvailable && got.PowerState == vdibroker.PowerRunning && got.Sessions == len(list)
		})
	}
}

// plan stores a scaling plan of one schedule for pool, in the zone whose
// clock shows 12:xx.
func (e *e2eAutoscale) plan(name, pool string, schedule map[string]any) {
	e.api.call("PUT", "/scalingplans/"+name, map[string]any{"timeZone": e.zone, "hostPoolType": "Pooled",
		"hostPools": []string{pool}, "schedules": []any{schedule}}, 201, nil)
}

// evaluations returns the pool's evaluations, oldest first.
func (e *e2eAutoscale) evaluations(pool string) []vdibroker.AutoscaleEvaluation {
	var list struct {
		Value []vdibroker.AutoscaleEvaluation `json:"value"`
	}
	e.api.call("GET", "/hostpools/"+pool+"/autoscale/evaluations?limit=1000", nil, 200, &list)
	slices.Reverse(list.Value)
	return list.Value
}

// actions lists the evaluations' actions as "Action host", oldest first,
// and fails on an action without a reason or with an error.
func (e *e2eAutoscale) actions(t *testing.T, pool string) []string {
	t.Helper()
	var out []string
	for _, ev := range e.evaluations(pool) {
		for _, a := range ev.Actions {
			if a.Reason == "" || a.Error != "" {
				t.Errorf("evaluation %d of %s: action %+v: want a reason and no error", ev.Seq, pool, a)
			}
			out = append(out, strings.TrimSpace(a.Action+" "+a.Host))
		}
	}
	return out
}

func e2eSessions(user ...string) []vdibroker.AgentSession {
	var list []vdibroker.AgentSession
	for _, u := range user {
		list = append(list, vdibroker.AgentSession{ID: "sess-" + u, User: u, State: vdibroker.StateActive})
	}
	return list
}

// TestAutoscaleE2E runs the autoscaler of a real broker over real agents.
func TestAutoscaleE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds the binary and runs agents")
	}
	e := e2eStartAutoscale(t)
	t.Run("ramp-down", func(t *testing.T) { e2eRampDown(t, e) })
	t.Run("session during the wait", func(t *testing.T) { e2eSessionDuringWait(t, e) })
	t.Run("session during the drain", func(t *testing.T) { e2eSessionDuringDrain(t, e) })
	t.Run("ramp-up", func(t *testing.T) { e2eRampUp(t, e) })
}

// e2eRampDown: ramp-down (R-A3) with maxSessionLimit 5 and threshold 90%.
// dn-1 is admin-drained with 1 session, dn-2 has 1 (alice), dn-3 has 2.
// The autoscaler manages dn-2 and dn-3: 4 sessions over 2×5 = 40%;
// without dn-2 (fewest sessions) 4/5 = 80% <= 90, without dn-3 as well
// nothing is left: dn-2 alone is drained. Forced logoff after 10 plan
// minutes (5 s): alice is told, then logged off; the agent's provider
// ends the session; the next evaluation stops dn-2 (its agent gets
// SIGTERM) and lifts its autoscale drain. dn-1 stays drained and running.
func e2eRampDown(t *testing.T, e *e2eAutoscale) {
	const pool = "as-down"
	e.pool(t, pool, 5, map[string][]vdibroker.AgentSession{
		"dn-1": e2eSessions("zoe"), "dn-2": e2eSessions("alice"), "dn-3": e2eSessions("bob", "carol"),
	})
	e.api.call("PATCH", "/hostpools/"+pool+"/sessionhosts/dn-1", map[string]any{"allowNewSession": false}, 200, nil)
	pid := e.lab.pid("dn-2")
	sc := e2eSchedule(6, 8, 11, 15) // 12:xx is ramp-down
	sc["rampDownForceLogoffUsers"], sc["rampDownWaitTimeMinutes"], sc["rampDownNotificationMessage"] = true, 10, "dn closes, sign out"
	e.plan("plan-down", pool, sc)

	api := e.api
	e2eEventually(t, "dn-2 in autoscale drain", 30*time.Second, func() bool { return api.host(pool, "dn-2").AutoscaleDrain })
	if h := api.host(pool, "dn-2"); !h.AllowNewSession {
		t.Errorf("dn-2 in autoscale drain: allowNewSession %v, want untouched (true): the autoscale drain is a separate flag", h.AllowNewSession)
	}
	// The notification reached the agent's session provider at once.
	e2eEventually(t, "alice told to sign out", 30*time.Second, func() bool {
		m := e.lab.messages("dn-2")
		return strings.Contains(m, "dn closes, sign out") && strings.Contains(m, "sess-alice")
	})
	if e.lab.messages("dn-3") != "" || e.lab.messages("dn-1") != "" {
		t.Errorf("messages on hosts not drained: dn-1 %q dn-3 %q", e.lab.messages("dn-1"), e.lab.messages("dn-3"))
	}
	// After the wait: logged off (the provider dropped her), stopped.
	e2eEventually(t, "dn-2 stopped", 60*time.Second, func() bool {
		h := api.host(pool, "dn-2")
		return h.PowerState == vdibroker.PowerStopped && h.Status == vdibroker.StatusShutdown
	})
	if strings.Contains(e.lab.readSessions("dn-2"), "alice") {
		t.Errorf("dn-2 stopped while its agent still reports alice: %s", e.lab.readSessions("dn-2"))
	}
	e2eEventually(t, "dn-2's agent exited (SIGTERM)", 30*time.Second, func() bool { return e2eGone(pid) })
	e2eEventually(t, "dn-2's autoscale drain lifted", 30*time.Second, func() bool { return !api.host(pool, "dn-2").AutoscaleDrain })
	if h := api.host(pool, "dn-2"); !h.AllowNewSession {
		t.Errorf("dn-2 after the stop: allowNewSession false, want true")
	}

	// Two more evaluations: nothing else moves.
	n := len(e.evaluations(pool))
	e2eEventually(t, "two more evaluations", 30*time.Second, func() bool { return len(e.evaluations(pool)) >= n+2 })
	if h := api.host(pool, "dn-1"); h.AllowNewSession || h.AutoscaleDrain || h.PowerState != vdibroker.PowerRunning || h.Status != vdibroker.StatusAvailable {
		t.Errorf("dn-1 (admin-drained): allowNewSession %v autoscaleDrain %v %s %s, want still drained by the admin only and running",
			h.AllowNewSession, h.AutoscaleDrain, h.PowerState, h.Status)
	}
	if h := api.host(pool, "dn-3"); h.AutoscaleDrain || h.PowerState != vdibroker.PowerRunning || h.Sessions != 2 {
		t.Errorf("dn-3: autoscaleDrain %v %s sessions %d, want undrained, running, 2", h.AutoscaleDrain, h.PowerState, h.Sessions)
	}
	got := e.actions(t, pool)
	want := []string{"Drain dn-2", "Notify dn-2", "Logoff dn-2", "Stop dn-2", "Undrain dn-2"}
	if !slices.Equal(got, want) {
		t.Errorf("actions %q, want %q", got, want)
	}
	if got, want := e.lab.actions(), "start dn-"; !strings.Contains(got, "stop dn-2\n") || strings.Contains(got, "stop dn-1") || strings.Contains(got, "stop dn-3") || !strings.Contains(got, want) {
		t.Errorf("driver actions %q: want dn-2 stopped and no other", got)
	}
	evs := e.evaluations(pool)
	// The message goes with the drain; the logoff once the wait of 10
	// plan minutes (5 s of the test's clock) has passed since the drain.
	when := map[string]time.Time{}
	for _, ev := range evs {
		for _, a := range ev.Actions {
			when[a.Action] = ev.Time
		}
	}
	if !when[vdibroker.ActionNotify].Equal(when[vdibroker.ActionDrain]) {
		t.Errorf("notified at %s, drained at %s: want the message with the drain", when[vdibroker.ActionNotify], when[vdibroker.ActionDrain])
	}
	if d := when[vdibroker.ActionLogoff].Sub(when[vdibroker.ActionDrain]); d < 5*time.Second {
		t.Errorf("logged off %s after the drain, want after the wait of 10 plan minutes (5 s)", d)
	}
	last := evs[len(evs)-1]
	// Last: dn-3 alone runs, 3 sessions (dn-1's count as demand) over 5.
	if last.Phase != vdibroker.PhaseRampDown || last.Plan != "plan-down" || last.Hosts != 2 || last.RunningHosts != 1 || last.Sessions != 3 ||
		last.AvailableCapacity != 5 || last.UsedCapacityPct != 60 || last.ThresholdPct != 90 || last.Note == "" {
		t.Errorf("last evaluation %+v: want RampDown of plan-down, 2 hosts managed, 1 running, 3 sessions over 5 (60%%) under 90%%, with a note", last)
	}
}

// e2eSessionDuringWait: kp-1 (1 session) and kp-2 (2), maxSessionLimit 4:
// 3 over 8 = 37.5%; without kp-1 3/4 = 75% <= 90, so kp-1 is drained and
// its user told to leave within 1000 plan minutes. Meanwhile dave logs
// on at kp-1 (its agent reports him, R-S2): the drained kp-1 is no
// capacity, so 4 sessions over kp-2's 4 are 100% > 90 and the plan needs
// kp-1 back (R-A2): its autoscale drain is lifted before any stop, and
// with 4 sessions no host may go (4/4 = 100% > 90), so it is not drained
// again.
func e2eSessionDuringWait(t *testing.T, e *e2eAutoscale) {
	const pool = "as-keep"
	e.pool(t, pool, 4, map[string][]vdibroker.AgentSession{"kp-1": e2eSessions("erin"), "kp-2": e2eSessions("frank", "grace")})
	sc := e2eSchedule(6, 8, 11, 15)
	sc["rampDownForceLogoffUsers"], sc["rampDownWaitTimeMinutes"] = true, 1000
	e.plan("plan-keep", pool, sc)
	api := e.api
	e2eEventually(t, "kp-1 in autoscale drain and erin told", 30*time.Second, func() bool {
		return api.host(pool, "kp-1").AutoscaleDrain && strings.Contains(e.lab.messages("kp-1"), "sess-erin")
	})
	e.lab.sessions("kp-1", e2eSessions("erin", "dave"))
	e2eEventually(t, "kp-1's autoscale drain lifted", 30*time.Second, func() bool { return !api.host(pool, "kp-1").AutoscaleDrain })
	n := len(e.evaluations(pool))
	e2eEventually(t, "two more evaluations", 30*time.Second, func() bool { return len(e.evaluations(pool)) >= n+2 })
	h := api.host(pool, "kp-1")
	if h.AutoscaleDrain || h.PowerState != vdibroker.PowerRunning || h.Sessions != 2 || !h.AllowNewSession {
		t.Errorf("kp-1: autoscaleDrain %v allowNewSession %v %s sessions %d, want kept running with both sessions", h.AutoscaleDrain, h.AllowNewSession, h.PowerState, h.Sessions)
	}
	if got, want := e.actions(t, pool), []string{"Drain kp-1", "Notify kp-1", "Undrain kp-1"}; !slices.Equal(got, want) {
		t.Errorf("actions %q, want %q", got, want)
	}
	for _, ev := range e.evaluations(pool) {
		for _, a := range ev.Actions {
			if a.Action == vdibroker.ActionUndrain && !strings.Contains(a.Reason, "> threshold 90%") {
				t.Errorf("undrain's reason %q, want the used capacity over the threshold", a.Reason)
			}
		}
	}
	if strings.Contains(e.lab.actions(), "stop kp-") {
		t.Errorf("driver actions %q: a kp host was stopped", e.lab.actions())
	}
}

// e2eSessionDuringDrain: without forced logoff, no message, and the host
// waits for its users. ka-1 (1 session) and ka-2 (5), maxSessionLimit 10:
// 6 over 20 = 30%; without ka-1 6/10 = 60% <= 90, so ka-1 is drained.
// Then oscar logs on at ka-1 (its agent reports him, R-S2): 7 over ka-2's
// 10 is 70%, the plan does not need ka-1 back, but ka-1 got a session
// while draining (2 > the 1 it had) and is kept running, its autoscale
// drain lifted (R-A3). The plan's numbers may drain it again at a later
// evaluation; it is never stopped while its users are on it.
func e2eSessionDuringDrain(t *testing.T, e *e2eAutoscale) {
	const pool = "as-drain"
	e.pool(t, pool, 10, map[string][]vdibroker.AgentSession{"ka-1": e2eSessions("nina"), "ka-2": e2eSessions("o1", "o2", "o3", "o4", "o5")})
	e.plan("plan-drain", pool, e2eSchedule(6, 8, 11, 15))
	api := e.api
	e2eEventually(t, "ka-1 in autoscale drain", 30*time.Second, func() bool { return api.host(pool, "ka-1").AutoscaleDrain })
	e.lab.sessions("ka-1", e2eSessions("nina", "oscar"))
	e2eEventually(t, "ka-1's undrain recorded", 30*time.Second, func() bool { return slices.Contains(e.actions(t, pool), "Undrain ka-1") })
	got := e.actions(t, pool)
	if len(got) < 2 || got[0] != "Drain ka-1" || got[1] != "Undrain ka-1" {
		t.Fatalf("actions %q, want Drain ka-1 then Undrain ka-1", got)
	}
	for _, ev := range e.evaluations(pool) {
		for _, a := range ev.Actions {
			if a.Action == vdibroker.ActionUndrain && !strings.Contains(a.Reason, "got a session while draining (2, was 1)") {
				t.Errorf("undrain's reason %q, want that it got a session while draining", a.Reason)
			}
			if a.Action == vdibroker.ActionNotify || a.Action == vdibroker.ActionLogoff || a.Action == vdibroker.ActionStop {
				t.Errorf("%s %s (%s): without rampDownForceLogoffUsers nobody is told, logged off or stopped", a.Action, a.Host, a.Reason)
			}
		}
	}
	if h := api.host(pool, "ka-1"); h.PowerState != vdibroker.PowerRunning || h.Sessions != 2 {
		t.Errorf("ka-1 %s with %d sessions, want running with both", h.PowerState, h.Sessions)
	}
	if m := e.lab.messages("ka-1"); m != "" {
		t.Errorf("ka-1's users were sent %q without rampDownForceLogoffUsers", m)
	}
}

// e2eRampUp: up-1 runs with 2 sessions, maxSessionLimit 2, up-2 is
// Stopped; ramp-up threshold 60%: used 2/2 = 100% > 60, so the
// autoscaler starts up-2 through the driver (R-A2); its agent registers
// and heartbeats, and the next connect lands on it (up-1 is full).
func e2eRampUp(t *testing.T, e *e2eAutoscale) {
	const pool = "as-up"
	e.pool(t, pool, 2, map[string][]vdibroker.AgentSession{"up-1": e2eSessions("heidi", "ivan")}, "up-2")
	if h := e.api.host(pool, "up-2"); h.PowerState != vdibroker.PowerStopped {
		t.Fatalf("up-2 %s before the plan, want Stopped", h.PowerState)
	}
	e.plan("plan-up", pool, e2eSchedule(11, 15, 16, 18)) // 12:xx is ramp-up
	api := e.api
	e2eEventually(t, "up-2 started by the autoscaler, its agent heartbeating", 60*time.Second, func() bool {
		h := api.host(pool, "up-2")
		return h.Status == vdibroker.StatusAvailable && h.PowerState == vdibroker.PowerRunning
	})
	n := len(e.evaluations(pool))
	e2eEventually(t, "one more evaluation", 30*time.Second, func() bool { return len(e.evaluations(pool)) > n })
	code, _, body := e2eConnect(t, api, pool, "judy")
	if code != 201 || body["sessionHost"] != "up-2" {
		t.Fatalf("judy's connect: %d %v, want 201 on up-2", code, body)
	}
	if got := e.actions(t, pool); len(got) == 0 || got[0] != "Start up-2" || slices.Contains(got[1:], "Start up-2") {
		t.Errorf("actions %q, want one Start up-2 first", got)
	}
	evs := e.evaluations(pool)
	if first := evs[0]; first.Phase != vdibroker.PhaseRampUp || first.UsedCapacityPct != 100 || first.ThresholdPct != 60 || first.Sessions != 2 || first.AvailableCapacity != 2 {
		t.Errorf("first evaluation %+v: want RampUp, 2 sessions over 2 (100%%) above 60%%", first)
	}
	if got := e.lab.actions(); strings.Count(got, "start up-2 as-up\n") != 1 {
		t.Errorf("driver actions %q: want up-2 started once", got)
	}
}
