package store_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestCountsStayExact is the R-S1/R-D3 invariant under concurrency: four
// workers on two store instances (replicas) run random placements, ends,
// heartbeats with random reports, pending expiry and forced host deletes;
// afterwards every host's stored sessions and connectingSessions equal its
// actual open and Pending sessions, and no host exceeds the limit (R-C4).
func TestCountsStayExact(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		replicas := []*store.DB{tg.open(t, store.Options{}), tg.open(t, store.Options{})}
		s := replicas[0]
		p := pool("pool1", vdibroker.Pooled)
		p.PendingTimeoutSeconds = 10
		mustPool(t, s, p)
		hosts := []string{"h0", "h1", "h2", "h3"}
		for _, h := range hosts {
			mustHost(t, s, "pool1", h)
		}
		const limit, workers, ops = 5, 4, 60
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), 42))
				st := replicas[w%len(replicas)]
				ctx := t.Context()
				for i := range ops {
					now := t0.Add(time.Duration(i) * time.Second)
					host := hosts[rng.IntN(len(hosts))]
					user := fmt.Sprintf("u%d", rng.IntN(12))
					var err error
					switch op := rng.IntN(10); {
					case op < 4:
						c := placement("pool1", host, user, limit)
						c.Session.CreateTime, c.Session.StateTime = now, now
						err = st.CommitPlacement(ctx, c)
						if vdibroker.ErrorCode(err) == vdibroker.EConflict || vdibroker.ErrorCode(err) == vdibroker.ENotFound {
							err = nil // full, user has a session, or host deleted
						}
					case op < 5:
						var l []*vdibroker.UserSession
						l, err = st.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "pool1", User: user})
						for _, u := range l {
							if err == nil {
								err = st.EndSession(ctx, "pool1", u.ID, "test", now)
							}
						}
					case op < 8:
						var reported []vdibroker.AgentSession
						for j := range rng.IntN(4) {
							state := vdibroker.StateActive
							if rng.IntN(3) == 0 {
								state = vdibroker.StateDisconnected
							}
							reported = append(reported, vdibroker.AgentSession{ID: fmt.Sprintf("a%d", rng.IntN(6)+j), User: fmt.Sprintf("u%d", rng.IntN(12)), State: state})
						}
						_, err = st.ApplyHeartbeat(ctx, "pool1", host, &vdibroker.HeartbeatRequest{Sessions: reported}, now)
						if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
							err = nil
						}
					case op < 9:
						_, err = st.ExpirePending(ctx, now)
					default:
						if rng.IntN(4) == 0 {
							err = st.DeleteSessionHost(ctx, "pool1", host, true)
							if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
								err = nil
							}
							mustHost(t, st, "pool1", host)
						}
					}
					if err != nil {
						t.Errorf("worker %d op %d: %v", w, i, err)
						return
					}
				}
			})
		}
		wg.Wait()
		ended, _ := s.ListUserSessions(t.Context(), vdibroker.SessionFilter{HostPool: "pool1", State: vdibroker.StateLoggedOff})
		open, _ := s.ListUserSessions(t.Context(), vdibroker.SessionFilter{HostPool: "pool1"})
		if len(ended) == 0 || len(open) == 0 {
			t.Errorf("the workload did too little to check: %d ended and %d open sessions", len(ended), len(open))
		}
		bad, err := s.CheckCounts(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bad {
			t.Errorf("counts drifted: %s", b)
		}
		l, _ := s.ListSessionHosts(t.Context(), "pool1")
		for _, h := range l {
			// Adopted sessions may push a host past the limit (they are
			// facts reported by the agent); placed ones never do.
			placed, _ := s.ListUserSessions(t.Context(), vdibroker.SessionFilter{HostPool: "pool1", SessionHost: h.Name})
			n := 0
			for _, u := range placed {
				if rec, err := s.GetPlacement(t.Context(), "pool1", u.ID); err == nil && rec != nil {
					n++
				}
			}
			if n > limit {
				t.Errorf("host %s has %d placed sessions, limit %d", h.Name, n, limit)
			}
		}
	})
}
