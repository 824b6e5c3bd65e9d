package store_test

import (
	"fmt"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// One heartbeat that reports 150 of its host's placed sessions for the
// first time (a connect storm's) logs each on (R-S2 step 1b: its agent id,
// Active or Disconnected as reported), whatever the number of statements
// the store writes them in, and the host's counts follow: 150 open, the
// 10 sessions not reported still connecting.
func TestHeartbeatWithManyLogons(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("p", vdibroker.Pooled))
		mustHost(t, s, "p", "h")
		const placed, reported = 160, 150
		for i := range placed {
			if err := s.CommitPlacement(ctx, placement("p", "h", fmt.Sprintf("u%03d", i), vdibroker.NoSessionLimit)); err != nil {
				t.Fatal(err)
			}
		}
		var report []vdibroker.AgentSession
		for i := range reported {
			state := vdibroker.StateActive
			if i%7 == 0 {
				state = vdibroker.StateDisconnected
			}
			report = append(report, vdibroker.AgentSession{ID: fmt.Sprintf("a%d", i), User: fmt.Sprintf("u%03d", i), State: state})
		}
		res, err := s.ApplyHeartbeat(ctx, "p", "h", &vdibroker.HeartbeatRequest{Sessions: report}, t0)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Host; got.Sessions != placed || got.ConnectingSessions != placed-reported {
			t.Errorf("answered counts: %d sessions, %d connecting; want %d, %d", got.Sessions, got.ConnectingSessions, placed, placed-reported)
		}
		h, err := s.GetSessionHost(ctx, "p", "h")
		if err != nil {
			t.Fatal(err)
		}
		if h.Sessions != placed || h.ConnectingSessions != placed-reported {
			t.Errorf("stored counts: %d sessions, %d connecting; want %d, %d", h.Sessions, h.ConnectingSessions, placed, placed-reported)
		}
		l, err := s.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "p"})
		if err != nil {
			t.Fatal(err)
		}
		if len(l) != placed {
			t.Fatalf("%d sessions listed, want %d", len(l), placed)
		}
		for _, u := range l {
			var i int
			fmt.Sscanf(u.User, "u%03d", &i)
			want, wantAgent := vdibroker.StatePending, ""
			if i < reported {
				want, wantAgent = vdibroker.StateActive, fmt.Sprintf("a%d", i)
				if i%7 == 0 {
					want = vdibroker.StateDisconnected
				}
			}
			if u.State != want || u.AgentSessionID != wantAgent || (i < reported && !u.StateTime.Equal(t0)) {
				t.Errorf("%s: %s, agent %q, since %s; want %s, agent %q", u.User, u.State, u.AgentSessionID, u.StateTime, want, wantAgent)
			}
		}
	})
}
