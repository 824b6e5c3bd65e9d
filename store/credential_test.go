package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// registerHosts creates a registration token for pool and registers each
// host name with credential "cred-"+name.
func registerHosts(t *testing.T, s *store.DB, pool string, names ...string) {
	t.Helper()
	ctx := t.Context()
	if err := s.CreateRegistrationToken(ctx, &vdibroker.RegistrationToken{HostPool: pool, Hash: "rt-" + pool, CreateTime: t0, ExpireTime: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, err := s.RegisterHost(ctx, "rt-"+pool, &vdibroker.RegisterRequest{HostName: n}, "cred-"+n, t0); err != nil {
			t.Fatal(err)
		}
	}
}

// beatAndLookUp heartbeats each host and looks its credential up twice,
// so that a store that caches hosts by credential has them cached.
func beatAndLookUp(t *testing.T, s *store.DB, pool string, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := s.ApplyHeartbeat(t.Context(), pool, n, &vdibroker.HeartbeatRequest{}, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if h, err := s.HostByCredential(t.Context(), "cred-"+n); err != nil || h.Name != n || h.HostPool != pool {
				t.Fatalf("%s by credential: %+v %v", n, h, err)
			}
		}
	}
}

// TestCredentialRevokedAtOnce (R-SEC): a deleted host's credential, a
// deleted pool's hosts' credentials and a re-keyed host's old credential
// fail as soon as the delete or re-key returns, even right after the
// credential was used.
func TestCredentialRevokedAtOnce(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		mustPool(t, s, pool("pool2", vdibroker.Pooled))
		registerHosts(t, s, "pool1", "h1", "h2", "h3")
		registerHosts(t, s, "pool2", "x1", "x2")
		beatAndLookUp(t, s, "pool1", "h1", "h2", "h3")
		beatAndLookUp(t, s, "pool2", "x1", "x2")

		// Re-key h1.
		if _, err := s.RegisterHost(ctx, "rt-pool1", &vdibroker.RegisterRequest{HostName: "h1", CurrentCredentialHash: "cred-h1"}, "cred-h1-new", t0.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		_, err := s.HostByCredential(ctx, "cred-h1")
		wantCode(t, err, vdibroker.EUnauthenticated)
		if h, err := s.HostByCredential(ctx, "cred-h1-new"); err != nil || h.Name != "h1" {
			t.Errorf("new credential: %+v %v", h, err)
		}

		// Delete h2 (with a session, so force).
		mustCommit(t, s, placement("pool1", "h2", "alice", 10))
		if err := s.DeleteSessionHost(ctx, "pool1", "h2", true); err != nil {
			t.Fatal(err)
		}
		_, err = s.HostByCredential(ctx, "cred-h2")
		wantCode(t, err, vdibroker.EUnauthenticated)
		if _, err := s.HostByCredential(ctx, "cred-h3"); err != nil {
			t.Errorf("h3 after h2's delete: %v", err)
		}

		// Delete pool2 with its hosts.
		if _, err := s.DeleteHostPool(ctx, "pool2", true, vdibroker.Precondition{}); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"x1", "x2"} {
			_, err = s.HostByCredential(ctx, "cred-"+n)
			wantCode(t, err, vdibroker.EUnauthenticated)
		}

		// A name registered again in a new pool of the same name gets a
		// new credential; the old one stays revoked.
		mustPool(t, s, pool("pool2", vdibroker.Pooled))
		if err := s.CreateRegistrationToken(ctx, &vdibroker.RegistrationToken{HostPool: "pool2", Hash: "rt2b", CreateTime: t0, ExpireTime: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RegisterHost(ctx, "rt2b", &vdibroker.RegisterRequest{HostName: "x1"}, "cred-x1-new", t0); err != nil {
			t.Fatal(err)
		}
		_, err = s.HostByCredential(ctx, "cred-x1")
		wantCode(t, err, vdibroker.EUnauthenticated)
	})
}

// TestHostByCredentialIsCurrent: the host HostByCredential returns has the
// counts and fields of the latest write, whatever wrote it, and is the
// caller's own copy.
func TestHostByCredentialIsCurrent(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		registerHosts(t, s, "pool1", "h1")
		beatAndLookUp(t, s, "pool1", "h1")

		want := func(what string) {
			t.Helper()
			got, err := s.HostByCredential(ctx, "cred-h1")
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			direct, err := s.GetSessionHost(ctx, "pool1", "h1")
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(direct, got); d != "" {
				t.Errorf("%s: HostByCredential differs from GetSessionHost (-get +byCredential):\n%s", what, d)
			}
		}
		id := mustCommit(t, s, placement("pool1", "h1", "alice", 10))
		want("after a placement")
		if _, err := s.ApplyHeartbeat(ctx, "pool1", "h1", &vdibroker.HeartbeatRequest{
			Sessions: []vdibroker.AgentSession{{ID: "1", User: "alice", State: vdibroker.StateActive}},
			Metrics:  &vdibroker.Metrics{CPUPercent: 42, SampledAt: t0.Add(2 * time.Minute)},
		}, t0.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		want("after a heartbeat")
		if _, err := s.UpdateSessionHost(ctx, "pool1", "h1", func(h *vdibroker.SessionHost) error {
			h.AllowNewSession = false
			h.AssignedUsers = []string{"bob"}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		want("after an admin update")
		if err := s.EndSession(ctx, "pool1", id, "AdminLogoff", t0.Add(3*time.Minute)); err != nil {
			t.Fatal(err)
		}
		want("after ending the session")

		got, _ := s.HostByCredential(ctx, "cred-h1")
		got.AssignedUsers[0] = "mallory"
		got.Metrics.CPUPercent = 1
		want("after the caller changed its copy")
	})
}

// TestCredentialRevokedUnderHeartbeats: heartbeats of a host racing its
// delete never bring its credential back once the delete has returned.
func TestCredentialRevokedUnderHeartbeats(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		ctx := t.Context()
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		registerHosts(t, s, "pool1", "h1", "h2")
		beatAndLookUp(t, s, "pool1", "h1", "h2")
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for _, n := range []string{"h1", "h2"} {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					_, _ = s.ApplyHeartbeat(ctx, "pool1", n, &vdibroker.HeartbeatRequest{}, t0.Add(time.Duration(i)*time.Second))
					_, _ = s.HostByCredential(ctx, "cred-"+n)
				}
			})
		}
		time.Sleep(20 * time.Millisecond) // let the heartbeats run; not a timed assertion
		err := s.DeleteSessionHost(ctx, "pool1", "h1", true)
		for range 50 {
			_, err2 := s.HostByCredential(ctx, "cred-h1")
			wantCode(t, err2, vdibroker.EUnauthenticated)
		}
		close(stop)
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.HostByCredential(ctx, "cred-h1")
		wantCode(t, err, vdibroker.EUnauthenticated)
		if _, err := s.HostByCredential(ctx, "cred-h2"); err != nil {
			t.Errorf("h2: %v", err)
		}
	})
}
