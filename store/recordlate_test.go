package store_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestCallNonceRecordedLate_RG5: a pod-to-pod connect's or
// registration's held nonce (vdibroker.CallNonce) is recorded by the
// commit of what the call does, which comes after the call was verified
// (At): a commit past its RecordBy may come after another that forgot
// the expired nonces at its own time, the nonce of a call this one
// replays among them, so it is refused with nothing written, and the
// nonce not recorded. The store's clock is the injected one, read in
// the transaction. Verified at t0, its window ending at t0+60 and
// RecordBy a minute later (t0+120, federation's heldMargin): committed
// at t0+121 it is refused, at t0+120 taken. On both engines.
func TestCallNonceRecordedLate_RG5(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		var ahead atomic.Int64
		s := tg.open(t, store.Options{Now: func() time.Time { return t0.Add(time.Duration(ahead.Load())) }})
		mustPool(t, s, pool("fed", vdibroker.Pooled))
		mustHost(t, s, "fed", "h1")
		withNonce := func(nonce string) (context.Context, *vdibroker.CallNonce) {
			n := &vdibroker.CallNonce{Pod: "ams1", Nonce: nonce, Expires: t0.Add(3 * time.Minute), At: t0, RecordBy: t0.Add(2 * time.Minute)}
			return vdibroker.WithCallNonce(t.Context(), n), n
		}
		late := "pod-to-pod call verified at 2026-11-29T12:00:00Z: nonce committed at 2026-11-29T12:02:01Z, too late to tell it from a replay (a slow commit here): nothing done, send again"

		ahead.Store(int64(121 * time.Second))
		ctx, n := withNonce("connect-1")
		c := placement("fed", "h1", "alice", 5)
		err := s.CommitPlacement(ctx, c)
		if vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated || !strings.Contains(vdibroker.ErrorMessage(err), late) {
			t.Fatalf("a placement whose nonce is committed past its RecordBy: %v, want Unauthenticated %q", err, late)
		}
		if n.Recorded() {
			t.Error("the refused placement marked its nonce recorded")
		}
		if _, err := s.GetUserSession(t.Context(), "fed", c.Session.ID); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("the refused placement's session: %v; want NotFound (nothing written)", err)
		}
		wantCounts(t, s, "fed", "h1", 0, 0)

		ctx, n = withNonce("register-1")
		err = s.RegisterDirectory(ctx, "ams1", 1, []string{"alice"}, false, false, t0.Add(121*time.Second))
		if vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated || !strings.Contains(vdibroker.ErrorMessage(err), late) {
			t.Fatalf("a registration whose nonce is committed past its RecordBy: %v, want Unauthenticated %q", err, late)
		}
		if pods, _, err := s.LookupDirectory(t.Context(), "alice", time.Time{}); err != nil || len(pods) != 0 {
			t.Errorf("alice after the refused registration: %v, %v; want none (nothing written)", pods, err)
		}

		// At RecordBy itself both are taken, and their nonces recorded.
		ahead.Store(int64(120 * time.Second))
		ctx, n = withNonce("connect-1")
		if err := s.CommitPlacement(ctx, c); err != nil || !n.Recorded() {
			t.Fatalf("the placement committed at its RecordBy: %v, recorded %v; want it placed and recorded", err, n.Recorded())
		}
		ctx, n = withNonce("register-1")
		if err := s.RegisterDirectory(ctx, "ams1", 1, []string{"alice"}, false, false, t0.Add(120*time.Second)); err != nil || !n.Recorded() {
			t.Fatalf("the registration committed at its RecordBy: %v, recorded %v", err, n.Recorded())
		}
	})
}
