package global_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	"github.com/vdibroker/vdibroker/federation/global"
	"github.com/vdibroker/vdibroker/store"
	clocktesting "k8s.io/utils/clock/testing"
)

// lateStore is a real store whose commits of nonces end took after they
// were asked for on the injected clock: the commit's sweep of the expired
// nonces runs at that later time, as a commit that waited does.
type lateStore struct {
	vdibroker.FederationStore
	clk  *clocktesting.FakeClock
	took time.Duration
}

func (s *lateStore) UseNonces(ctx context.Context, uses []vdibroker.NonceUse, expires, now time.Time) ([]error, error) {
	s.clk.Step(s.took)
	return s.FederationStore.UseNonces(ctx, uses, expires, now.Add(s.took))
}

// TestReplayAtTheWindowsEnd_RG5: a captured call replayed at the last
// moment its signature's window takes it (its timestamp + MaxSkew on the
// receiver's clock) is refused when its nonce is kept in the store (a
// write call, and a connect's nonce recorded when the connect ends),
// however the original was timed: the worst is a caller whose clock is
// MaxSkew ahead, so the original is verified at ts − MaxSkew. Timed on
// one injected clock (the verifier's and the store's), with a real
// SQLite store:
//
//   - write, commit 1 s late: the original at ts−60 was kept until
//     ts+60 (2 × MaxSkew from its verification); the replay verified at
//     ts+60 commits at ts+61, whose sweep forgot it: taken. Kept until
//     ts+120 (a MaxSkew past the window), it is refused as a replay.
//   - write, commit 61 s late, the clocks in step: the original at ts is
//     kept until ts+120; the replay verified at ts+60 commits at ts+121,
//     which forgot it: the call is taken only if still within its window
//     once its nonce is recorded, and it is not.
//   - connect recorded on its own 61 s after the replay was verified:
//     the original at ts−60 was kept until ts+120 (3 minutes from its
//     verification), forgotten at ts+121; kept until ts+180 (the window,
//     storeMargin and heldMargin) it refuses the replay.
func TestReplayAtTheWindowsEnd_RG5(t *testing.T) {
	secret := []byte("0123456789abcdef-federation")
	ts := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	body := []byte(`{"user":"alice"}`)
	for _, tc := range []struct {
		name     string
		held     bool
		original time.Time     // when the original is verified
		took     time.Duration // how long the replay's nonce takes to be recorded
	}{
		{"write, caller a MaxSkew ahead, commit 1 s late", false, ts.Add(-federation.MaxSkew), time.Second},
		{"write, clocks in step, commit 61 s late", false, ts, federation.MaxSkew + time.Second},
		{"connect, caller a MaxSkew ahead, recorded 61 s late", true, ts.Add(-federation.MaxSkew), federation.MaxSkew + time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := store.Open(t.Context(), "", t.TempDir(), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			clk := clocktesting.NewFakeClock(tc.original)
			ls := &lateStore{FederationStore: db, clk: clk}
			g := global.New(global.Config{Store: ls, Pod: "fra1", Clock: clk})
			v := &federation.Verifier{Secrets: federation.NewSecrets(secret), Pod: "fra1", Now: clk.Now, Nonces: g}
			h := federation.SignTo(secret, "POST", federation.ConnectPath, "ams1", "fra1", body, ts)
			get := func(k string) string { return h[k] }
			call := func() error {
				if !tc.held {
					_, err := v.Verify(t.Context(), get, "POST", federation.ConnectPath, body)
					return err
				}
				_, n, err := v.VerifyHeld(t.Context(), get, "POST", federation.ConnectPath, body)
				if err != nil {
					return err
				}
				clk.Step(ls.took) // the connect took that long
				ls.took = 0
				fresh, err := g.UseNonce(t.Context(), n.Pod, n.Nonce, n.Expires)
				if err == nil && !fresh {
					err = vdibroker.ErrReplayed()
				}
				return err
			}
			if err := call(); err != nil {
				t.Fatalf("the original at ts%+ds: %v", int(tc.original.Sub(ts)/time.Second), err)
			}
			clk.SetTime(ts.Add(federation.MaxSkew))
			ls.took = tc.took
			if err := call(); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
				t.Fatalf("replayed at ts+60, its nonce recorded %s later: %v, want Unauthenticated", tc.took, err)
			}
		})
	}
}
