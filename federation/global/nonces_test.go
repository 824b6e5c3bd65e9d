package global_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation/global"
	"github.com/vdibroker/vdibroker/internal/pgtest"
	"github.com/vdibroker/vdibroker/store"
)

// heldStore is a real store whose first UseNonces waits until release is
// closed, and which records the size of every UseNonces call.
type heldStore struct {
	vdibroker.FederationStore
	entered chan struct{} // closed when the first call arrives
	release chan struct{}
	once    sync.Once

	mu      sync.Mutex
	batches []int
}

func (s *heldStore) UseNonces(ctx context.Context, nonces []vdibroker.NonceUse, expires, now time.Time) ([]error, error) {
	first := false
	s.once.Do(func() { first = true; close(s.entered) })
	if first {
		<-s.release
	}
	s.mu.Lock()
	s.batches = append(s.batches, len(nonces))
	s.mu.Unlock()
	return s.FederationStore.UseNonces(ctx, nonces, expires, now)
}

// TestUseNonceSharesCommits_RG5: the nonces a pod verifies while a commit
// is under way share the next commit, each caller still answered only
// after its nonce is recorded, a replay among them refused; on both
// engines (the nonces are the store's, so a replay is refused on every
// replica).
func TestUseNonceSharesCommits_RG5(t *testing.T) {
	engines := map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return "" },
		"postgres": func(t *testing.T) string {
			return pgtest.SchemaDSN(t, "vdibroker_nonces_", "PostgreSQL nonce batching")
		},
	}
	for name, dsn := range engines {
		t.Run(name, func(t *testing.T) {
			db, err := store.Open(t.Context(), dsn(t), t.TempDir(), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			hs := &heldStore{FederationStore: db, entered: make(chan struct{}), release: make(chan struct{})}
			g := global.New(global.Config{Store: hs, Pod: "pod1"})
			ctx := t.Context()
			exp := time.Now().Add(2 * time.Minute)

			// The first call's commit is held; ten more calls queue
			// meanwhile, "dup" twice among them.
			first := make(chan error, 1)
			go func() {
				fresh, err := g.UseNonce(ctx, "pod2", "first", exp)
				if err == nil && !fresh {
					err = fmt.Errorf("first nonce: not fresh")
				}
				first <- err
			}()
			<-hs.entered
			nonces := []string{"dup", "dup"}
			for i := range 8 {
				nonces = append(nonces, fmt.Sprintf("n%d", i))
			}
			type result struct {
				nonce string
				fresh bool
				err   error
			}
			results := make(chan result, len(nonces))
			var queued sync.WaitGroup
			for _, n := range nonces {
				queued.Go(func() {
					fresh, err := g.UseNonce(ctx, "pod2", n, exp)
					results <- result{n, fresh, err}
				})
			}
			// Nobody is answered before the held commit ends.
			select {
			case r := <-results:
				t.Fatalf("%s answered (%v, %v) while the commit before it was held", r.nonce, r.fresh, r.err)
			case <-time.After(50 * time.Millisecond):
			}
			close(hs.release)
			if err := <-first; err != nil {
				t.Fatal(err)
			}
			queued.Wait()
			close(results)
			dupFresh := 0
			for r := range results {
				switch {
				case r.err != nil:
					t.Errorf("%s: %v", r.nonce, r.err)
				case r.nonce == "dup" && r.fresh:
					dupFresh++
				case r.nonce != "dup" && !r.fresh:
					t.Errorf("%s: refused as a replay, want fresh", r.nonce)
				}
			}
			if dupFresh != 1 {
				t.Errorf("the nonce sent twice was fresh %d times, want once", dupFresh)
			}
			// Replayed after its commit: refused.
			if fresh, err := g.UseNonce(ctx, "pod2", "n3", exp); err != nil || fresh {
				t.Errorf("n3 again: fresh %v, %v; want a replay", fresh, err)
			}
			hs.mu.Lock()
			defer hs.mu.Unlock()
			// [1 10 1]: the held commit, the ten queued behind it in
			// one (two if one of them came late), the replay.
			n := len(hs.batches)
			if n < 3 || n > 4 || hs.batches[0] != 1 || hs.batches[n-1] != 1 {
				t.Errorf("commits of %v nonces; want the held one, the queued ten in one or two, then the replay", hs.batches)
			}
		})
	}
}

// spentStore refuses the uses of pod "spent" as past their budget, and
// answers the others as fresh, or replays for nonce "seen".
type spentStore struct{ vdibroker.FederationStore }

func (spentStore) UseNonces(_ context.Context, uses []vdibroker.NonceUse, _, _ time.Time) ([]error, error) {
	out := make([]error, len(uses))
	for i, u := range uses {
		switch {
		case u.Pod == "spent":
			out[i] = &vdibroker.Error{Code: vdibroker.ETooManyRequests, Message: "spent"}
		case u.Nonce == "seen":
			out[i] = vdibroker.ErrReplayed()
		}
	}
	return out, nil
}

// TestUseNonceBudgetOfItsPod_RG5: the store's answer for each nonce of a
// shared commit is its caller's: a pod past its budget is refused
// (TooManyRequests), a replay is not fresh, and the other pods' calls in
// the same commit are fresh.
func TestUseNonceBudgetOfItsPod_RG5(t *testing.T) {
	g := global.New(global.Config{Store: spentStore{}, Pod: "pod1", PodTimeout: time.Minute})
	exp := time.Now().Add(2 * time.Minute)
	for _, tc := range []struct {
		pod, nonce string
		fresh      bool
		code       string
	}{
		{"spent", "s1", false, vdibroker.ETooManyRequests},
		{"pod2", "p1", true, ""},
		{"pod2", "seen", false, ""},
	} {
		fresh, err := g.UseNonce(t.Context(), tc.pod, tc.nonce, exp)
		if fresh != tc.fresh || vdibroker.ErrorCode(err) != tc.code {
			t.Errorf("%s's %s: fresh %v, %v; want %v, code %q", tc.pod, tc.nonce, fresh, err, tc.fresh, tc.code)
		}
	}
}
