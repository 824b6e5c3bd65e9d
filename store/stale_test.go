package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/loadindex"
	"github.com/vdibroker/vdibroker/store"
)

// TestHeartbeatKeepsStaleMetricCompensation_RLI6: between two samples the
// load index estimates the load of the sessions placed since the sample
// (R-LI6). The agent re-sends its last sample on every heartbeat (every
// 10 s; samples every 30 s), so a heartbeat whose sample is not newer than
// the stored one must leave the sample and its base alone, and a new
// sample's base counts only sessions whose load can be in it: not Pending,
// on the host at or before sampledAt (before, one heartbeat took the
// index from 80 back to 40, and the storm piled onto the host again).
func TestHeartbeatKeepsStaleMetricCompensation_RLI6(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		p := pool("li", vdibroker.Pooled)
		p.LoadBalancerType = vdibroker.LoadIndex
		// The CPU factor alone: index = cpu with its R-LI6 estimate.
		p.LoadBalancing.CPUThreshold, p.LoadBalancing.IncludeSessionCount = 100, false
		mustPool(t, s, p)
		mustHost(t, s, "li", "h1")
		at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
		place := func(sec int, user string) {
			t.Helper()
			c := placement("li", "h1", user, vdibroker.NoSessionLimit)
			c.Session.CreateTime, c.Session.StateTime = at(sec), at(sec)
			mustCommit(t, s, c)
		}
		var reported []vdibroker.AgentSession
		logOn := func(users ...string) {
			for _, u := range users {
				reported = append(reported, vdibroker.AgentSession{ID: "a-" + u, User: u, State: vdibroker.StateActive})
			}
		}
		// beat sends a heartbeat at sec with a sample (cpu, sampledAt) and
		// checks the stored sample, its base and the load index, in the
		// heartbeat's answer and in a read.
		beat := func(sec int, cpu float64, sampled int, wantCPU float64, wantBase, wantIndex int) {
			t.Helper()
			m := &vdibroker.Metrics{CPUPercent: cpu, SampledAt: at(sampled)}
			res, err := s.ApplyHeartbeat(ctx, "li", "h1", &vdibroker.HeartbeatRequest{Metrics: m, Sessions: reported}, at(sec))
			if err != nil {
				t.Fatal(err)
			}
			read, err := s.GetSessionHost(ctx, "li", "h1")
			if err != nil {
				t.Fatal(err)
			}
			for what, h := range map[string]*vdibroker.SessionHost{"answer": res.Host, "read": read} {
				loadindex.Present(p, []*vdibroker.SessionHost{h}, at(sec))
				if h.Metrics.CPUPercent != wantCPU || h.MetricsSessions != wantBase || h.LoadIndex != wantIndex {
					t.Errorf("heartbeat at %ds (%s): cpu %v base %d index %d, want %v, %d, %d",
						sec, what, h.Metrics.CPUPercent, h.MetricsSessions, h.LoadIndex, wantCPU, wantBase, wantIndex)
				}
			}
		}

		for i := range 4 {
			place(0, fmt.Sprintf("old%d", i))
		}
		logOn("old0", "old1", "old2", "old3")
		beat(10, 40, 5, 40, 4, 40) // 4 sessions in the sample of 5 s
		for i := range 4 {
			place(12, fmt.Sprintf("new%d", i))
		}
		// 8 sessions, sampled with 4: 40 + 40/4 × 4 = 80.
		beat(20, 40, 5, 40, 4, 80) // the same sample again: still 80 (was 40)
		beat(30, 10, 1, 40, 4, 80) // an older sample: ignored
		// A new sample at 35 s; the four placed at 12 s are still Pending,
		// so their load is not in it: base 4, 41 + 41/4 × 4 = 82.
		beat(40, 41, 35, 41, 4, 82)
		// They logged on; one more placed at 47 s, and zed, adopted at 50 s,
		// both after the sample of 45 s: base 8, 80 + 80/8 × 2 = 100.
		logOn("new0", "new1", "new2", "new3")
		place(47, "late")
		reported = append(reported, vdibroker.AgentSession{ID: "a-zed", User: "zed", State: vdibroker.StateActive})
		beat(50, 80, 45, 80, 8, 100)
		// A heartbeat without a sample keeps it.
		if _, err := s.ApplyHeartbeat(ctx, "li", "h1", &vdibroker.HeartbeatRequest{Sessions: reported}, at(60)); err != nil {
			t.Fatal(err)
		}
		if h, _ := s.GetSessionHost(ctx, "li", "h1"); h.Metrics.CPUPercent != 80 || h.MetricsSessions != 8 {
			t.Errorf("heartbeat without a sample: cpu %v base %d, want 80 and 8", h.Metrics.CPUPercent, h.MetricsSessions)
		}
	})
}

// TestHeartbeatSampleDatedAheadGivesWay_RLI6_RSEC: a heartbeat whose
// sample is dated years ahead (a wrong clock, or a stolen host credential
// reporting an idle host) is stored as sampled at the heartbeat's time.
// Stored as dated, every later sample of the host was older than it and
// ignored: the broker placed users by the figures of that one report, after
// the host was reset, re-keyed and loaded (R-LI1, R-LI6).
func TestHeartbeatSampleDatedAheadGivesWay_RLI6_RSEC(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		p := pool("la", vdibroker.Pooled)
		p.LoadBalancerType = vdibroker.LoadIndex
		p.LoadBalancing.CPUThreshold, p.LoadBalancing.IncludeSessionCount = 100, false
		mustPool(t, s, p)
		mustHost(t, s, "la", "h1")
		at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
		beat := func(sec int, m *vdibroker.Metrics) {
			t.Helper()
			if _, err := s.ApplyHeartbeat(ctx, "la", "h1", &vdibroker.HeartbeatRequest{Metrics: m}, at(sec)); err != nil {
				t.Fatal(err)
			}
		}
		beat(10, &vdibroker.Metrics{CPUPercent: 0, SampledAt: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)})
		h, err := s.GetSessionHost(ctx, "la", "h1")
		if err != nil {
			t.Fatal(err)
		}
		if !h.Metrics.SampledAt.Equal(at(10)) {
			t.Errorf("a sample dated 9999 is stored as sampled %s, want the heartbeat's time %s", h.Metrics.SampledAt, at(10))
		}
		// The host's own sample 25 s later, at 90 % CPU: taken.
		beat(40, &vdibroker.Metrics{CPUPercent: 90, SampledAt: at(35)})
		if h, err = s.GetSessionHost(ctx, "la", "h1"); err != nil {
			t.Fatal(err)
		}
		loadindex.Present(p, []*vdibroker.SessionHost{h}, at(40))
		if h.Metrics.CPUPercent != 90 || h.LoadIndex != 90 {
			t.Errorf("the host's sample after one dated 9999: cpu %v, load index %d; want 90 and 90 (the sample dated 9999 stuck)", h.Metrics.CPUPercent, h.LoadIndex)
		}
	})
}
