package store_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// TestCommitSeqOrdersHeartbeats pins the contract the server's view of
// host counts relies on (R-S1): a heartbeat result's counts include exactly
// the placements whose OnCommitted seq is below its Seq, even when both
// are in one group commit; OnCommitted runs once per committed placement,
// before the call returns, and never for a refused one (R-C4).
func TestCommitSeqOrdersHeartbeats(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		s := tg.open(t, store.Options{})
		mustPool(t, s, pool("seq", vdibroker.Pooled))
		mustHost(t, s, "seq", "h1")
		const n, limit = 120, 100
		seqs := make([]int64, n)
		calls := make([]int, n)
		errs := make([]error, n)
		type beat struct {
			seq      int64
			sessions int
		}
		var (
			mu    sync.Mutex
			beats []beat
			wg    sync.WaitGroup
		)
		for i := range n {
			wg.Go(func() {
				c := placement("seq", "h1", fmt.Sprintf("user%03d", i), limit)
				c.OnCommitted = func(seq int64) { seqs[i] = seq; calls[i]++ }
				errs[i] = s.CommitPlacement(t.Context(), c)
			})
			wg.Go(func() {
				res, err := s.ApplyHeartbeat(t.Context(), "seq", "h1", &vdibroker.HeartbeatRequest{}, t0)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				beats = append(beats, beat{res.Seq, res.Host.Sessions})
				mu.Unlock()
			})
		}
		wg.Wait()
		committed := map[int64]bool{}
		for i, err := range errs {
			switch {
			case err == nil:
				if calls[i] != 1 || seqs[i] == 0 || committed[seqs[i]] {
					t.Errorf("user%03d committed: OnCommitted called %d times with seq %d (want once, a seq of its own)", i, calls[i], seqs[i])
				}
				committed[seqs[i]] = true
			case errors.Is(err, vdibroker.ErrHostFull):
				if calls[i] != 0 {
					t.Errorf("user%03d refused, yet OnCommitted was called", i)
				}
			default:
				t.Errorf("user%03d: %v", i, err)
			}
		}
		if len(committed) != limit {
			t.Fatalf("%d placements committed, want %d", len(committed), limit)
		}
		sameBatch := 0
		for _, b := range beats {
			want := 0
			for seq := range committed {
				if seq < b.seq {
					want++
				}
				if seq>>16 == b.seq>>16 { // one batch: the same number above the low 16 bits
					sameBatch++
				}
			}
			if b.sessions != want {
				t.Errorf("heartbeat seq %d answered %d sessions; %d placements have a lower seq", b.seq, b.sessions, want)
			}
		}
		t.Logf("%d heartbeats, %d (placement, heartbeat) pairs in one batch", len(beats), sameBatch)
	})
}
