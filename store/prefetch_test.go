package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// A batch's heartbeats read their hosts and open sessions together and
// get their commands together (readAhead, deliverBatch): each must still
// get its own host, its own sessions reconciled (R-S2) and counted
// (R-S1), and its own commands (R-S4), and a
// heartbeat after another write of its host in the batch must see that
// write.
func TestBatchedHeartbeatsGetTheirOwnHosts(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("p", vdibroker.Pooled))
		ids := map[string]string{}
		for i := 1; i <= 5; i++ {
			h := fmt.Sprintf("h%d", i)
			mustHost(t, s, "p", h)
			if i <= 4 {
				ids[h] = mustCommit(t, s, placement("p", h, "u"+h, 10))
			}
		}
		cmds := map[string]string{}
		for _, h := range []string{"h2", "h4"} {
			c := &vdibroker.Command{HostPool: "p", SessionHost: h, Type: vdibroker.CommandDisconnect, SessionID: ids[h], User: "u" + h}
			if err := s.QueueCommand(ctx, c); err != nil {
				t.Fatal(err)
			}
			cmds[h] = c.ID
		}
		report := func(id, user, state string) *vdibroker.HeartbeatRequest {
			return &vdibroker.HeartbeatRequest{Sessions: []vdibroker.AgentSession{{ID: id, User: user, State: state}}}
		}
		x5 := placement("p", "h5", "x5", 10)
		now := t0.Add(time.Second)
		h1 := report("a1", "uh1", vdibroker.StateActive)
		h1.Metrics = &vdibroker.Metrics{CPUPercent: 41, MemoryPercent: 42, SampledAt: now}
		h3 := report("a3", "uh3", vdibroker.StateActive)
		h3.HealthError = "first"
		threshold := 70
		h3.Policy = &vdibroker.HostPolicy{HostLoadIndexThreshold: &threshold}
		ws := []store.Write{
			{Pool: "p", Host: "h1", Beat: h1},
			{Pool: "p", Host: "h2", Beat: &vdibroker.HeartbeatRequest{}},
			{Pool: "p", Host: "h3", Beat: h3},
			// Two heartbeats of one host: the second sees the first's
			// logon, and its row is written after the first's.
			{Pool: "p", Host: "h3", Beat: report("a3", "uh3", vdibroker.StateDisconnected)},
			{Pool: "p", Host: "h4", Beat: report("a4", "uh4", vdibroker.StateActive)},
			// A connect, then its host's heartbeat reporting the logon.
			{Placement: x5},
			{Pool: "p", Host: "h5", Beat: report("a5", "x5", vdibroker.StateActive)},
			{Pool: "p", Host: "nosuch", Beat: &vdibroker.HeartbeatRequest{}},
		}
		errs, res := s.CommitMixedBatch(ws, now)
		for i, w := range ws {
			if w.Host == "nosuch" {
				wantCode(t, errs[i], vdibroker.ENotFound)
				continue
			}
			if errs[i] != nil {
				t.Fatalf("write %d (%s): %v", i, w.Host, errs[i])
			}
			if w.Beat == nil {
				continue
			}
			r := res[i]
			if r.Host.Name != w.Host || r.Host.Sessions != 1 {
				t.Errorf("heartbeat %d of %s answered with host %s, %d sessions; want %s, 1", i, w.Host, r.Host.Name, r.Host.Sessions, w.Host)
			}
			var got []string
			for _, c := range r.Commands {
				got = append(got, c.ID)
			}
			want := cmds[w.Host]
			if i == 2 || i == 3 { // h3's: none
				want = ""
			}
			if (want == "") != (len(got) == 0) || (want != "" && (len(got) != 1 || got[0] != want)) {
				t.Errorf("heartbeat %d of %s got commands %v; want [%s]", i, w.Host, got, want)
			}
		}
		for h, want := range map[string]string{"h1": vdibroker.StateActive, "h2": vdibroker.StatePending,
			"h3": vdibroker.StateDisconnected, "h4": vdibroker.StateActive} {
			if u := session(t, s, "p", ids[h]); u.State != want {
				t.Errorf("%s's session is %s; want %s", h, u.State, want)
			}
		}
		if u := session(t, s, "p", x5.Session.ID); u.State != vdibroker.StateActive || u.AgentSessionID != "a5" {
			t.Errorf("the session placed on h5 in the batch is %s with agent id %q; want Active, a5 (the heartbeat after it matched it)", u.State, u.AgentSessionID)
		}
		for _, h := range []string{"h2", "h4"} {
			if state, _, err := s.Command(ctx, cmds[h]); err != nil || state != vdibroker.CommandDelivered {
				t.Errorf("%s's command is %s (%v); want Delivered", h, state, err)
			}
		}
		// The hosts' rows, written together after the heartbeats ran.
		for _, h := range []string{"h1", "h2", "h3", "h4", "h5"} {
			got, err := s.GetSessionHost(ctx, "p", h)
			if err != nil {
				t.Fatal(err)
			}
			if got.LastHeartBeat == nil || !got.LastHeartBeat.Equal(now) || got.HealthError != "" {
				t.Errorf("%s's row: last heartbeat %v, health error %q; want %v, none", h, got.LastHeartBeat, got.HealthError, now)
			}
			if h == "h3" && (got.Policy.HostLoadIndexThreshold == nil || *got.Policy.HostLoadIndexThreshold != 70) {
				t.Errorf("h3's policy %+v; want the threshold its first heartbeat set (the second, sending none, keeps it)", got.Policy)
			}
			if h == "h1" && (got.Metrics == nil || got.Metrics.CPUPercent != 41 || got.Metrics.MemoryPercent != 42 || got.MetricsSessions != 1) {
				t.Errorf("h1's metrics %+v over %d sessions; want the sample sent (41 %% CPU, 42 %% memory) over 1", got.Metrics, got.MetricsSessions)
			}
		}
		if bad, err := s.CheckCounts(ctx); err != nil || len(bad) > 0 {
			t.Errorf("counts: %v %v", bad, err)
		}
	})
}
