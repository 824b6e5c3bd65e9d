package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// On PostgreSQL a write waiting for one host's lock (another replica's
// long transaction holds it) holds up only the writes of its own group
// committer: connects on hosts of the other committers commit meanwhile.
// With one committer, a full pod's heartbeats queued connects behind them
// for a second.
func TestCommittersDoNotWaitForEachOther(t *testing.T) {
	s, dsn := postgresStore(t)
	if s.Committers() < 2 {
		t.Fatalf("PostgreSQL store runs %d group committers, want several", s.Committers())
	}
	ctx := t.Context()
	mustPool(t, s, pool("p", vdibroker.Pooled))
	// One host per committer.
	hosts := map[int]string{}
	for i := 0; len(hosts) < s.Committers(); i++ {
		name := fmt.Sprintf("h%d", i)
		if _, ok := hosts[s.CommitterOf("p", name)]; !ok {
			hosts[s.CommitterOf("p", name)] = name
			mustHost(t, s, "p", name)
		}
	}
	blocked := hosts[0]
	tx := holdHostLock(t, dsn, "p", blocked)
	beat := make(chan error, 1)
	go func() {
		_, err := s.ApplyHeartbeat(context.WithoutCancel(ctx), "p", blocked, &vdibroker.HeartbeatRequest{}, t0)
		beat <- err
	}()
	waitForLockWaiter(t, s, "the heartbeat of "+blocked)
	for c, host := range hosts {
		if c == 0 {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.CommitPlacement(wctx, placement("p", host, "user-"+host, 10))
		cancel()
		if err != nil {
			t.Fatalf("connect on %s (committer %d) while committer 0 waits for %s's lock: %v", host, c, blocked, err)
		}
	}
	select {
	case err := <-beat:
		t.Fatalf("the heartbeat of %s did not wait for its host's lock: %v", blocked, err)
	default:
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-beat; err != nil {
		t.Fatal(err)
	}
}

// Write numbers follow commit order whatever the number of committers
// (HeartbeatResult.Seq, OnCommitted): hooks see them rising, so a caller
// that has seen one has seen every lower one (the view's landedMark relies
// on it), and each host's heartbeat counts include exactly that host's
// placements numbered lower (R-S1).
func TestCommitNumbersFollowCommitOrder(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		s := tg.open(t, store.Options{})
		mustPool(t, s, pool("seq", vdibroker.Pooled))
		const hosts, perHost = 16, 24
		for h := range hosts {
			mustHost(t, s, "seq", fmt.Sprintf("h%02d", h))
		}
		var (
			mu       sync.Mutex
			last     int64
			disorder []string
			placed   = map[string][]int64{} // host: committed seqs
			beats    = map[string][][2]int64{}
			wg       sync.WaitGroup
		)
		for h := range hosts {
			host := fmt.Sprintf("h%02d", h)
			for u := range perHost {
				wg.Go(func() {
					c := placement("seq", host, fmt.Sprintf("%s-u%02d", host, u), perHost)
					c.OnCommitted = func(seq int64) {
						mu.Lock()
						defer mu.Unlock()
						if seq <= last {
							disorder = append(disorder, fmt.Sprintf("%d after %d", seq, last))
						}
						last = seq
						placed[host] = append(placed[host], seq)
					}
					if err := s.CommitPlacement(t.Context(), c); err != nil {
						t.Error(err)
					}
				})
				wg.Go(func() {
					res, err := s.ApplyHeartbeat(t.Context(), "seq", host, &vdibroker.HeartbeatRequest{}, t0)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					beats[host] = append(beats[host], [2]int64{res.Seq, int64(res.Host.Sessions)})
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		if len(disorder) > 0 {
			t.Errorf("%d committers: OnCommitted saw numbers out of order: %v", s.Committers(), disorder)
		}
		for host, l := range beats {
			for _, b := range l {
				want := 0
				for _, seq := range placed[host] {
					if seq < b[0] {
						want++
					}
				}
				if int(b[1]) != want {
					t.Errorf("%s: heartbeat seq %d answered %d sessions; %d of its placements have a lower seq", host, b[0], b[1], want)
				}
			}
		}
	})
}

// A request without a savepoint of its own (a connect, a heartbeat) that
// fails with a database error fails alone: the batch runs again with it in
// a savepoint, and the other writes of the batch commit.
func TestAtomicRequestFailsAlone(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		mustPool(t, s, pool("p", vdibroker.Pooled))
		mustHost(t, s, "p", "h1")
		mustHost(t, s, "p", "h2")
		cs := []*vdibroker.PlacementCommit{placement("p", "h1", "alice", 10), placement("p", "h2", "bob", 10)}
		errs, failed := s.CommitBatchWithFailure(cs)
		if failed == nil || !strings.Contains(failed.Error(), "no_such_column") {
			t.Errorf("the failing request answered %v, want its database error", failed)
		}
		for i, err := range errs {
			if err != nil {
				t.Errorf("placement of %s failed with the other request: %v", cs[i].Session.User, err)
				continue
			}
			if _, err := s.GetUserSession(t.Context(), "p", cs[i].Session.ID); err != nil {
				t.Errorf("placement of %s answered, yet: %v", cs[i].Session.User, err)
			}
		}
		if bad, err := s.CheckCounts(t.Context()); err != nil || len(bad) > 0 {
			t.Errorf("counts after the batch: %v %v", bad, err)
		}
	})
}

// On PostgreSQL a connect does not wait for heartbeats: with a heartbeat
// committer held up by a host's lock and 100 heartbeats of its hosts
// queued behind it, a connect on one of those hosts commits at once
// (R-D2; the pod bench wants connect p99 under 100 ms while a pod's
// 1,000 heartbeats a second are committed), and the heartbeats commit after the lock is
// released.
func TestConnectsDoNotWaitForHeartbeats(t *testing.T) {
	s, dsn := postgresStore(t)
	ctx := t.Context()
	mustPool(t, s, pool("p", vdibroker.Pooled))
	const queued = 100
	var hosts []string // all on heartbeat committer 0
	for i := 0; len(hosts) < queued+1; i++ {
		if name := fmt.Sprintf("h%04d", i); s.BeatCommitterOf("p", name) == 0 {
			hosts = append(hosts, name)
			mustHost(t, s, "p", name)
		}
	}
	blocked, beating := hosts[0], hosts[1:]
	tx := holdHostLock(t, dsn, "p", blocked)
	var wg sync.WaitGroup
	beat := func(host string) {
		if _, err := s.ApplyHeartbeat(ctx, "p", host, &vdibroker.HeartbeatRequest{}, t0); err != nil {
			t.Error(err)
		}
	}
	wg.Go(func() { beat(blocked) })
	waitForLockWaiter(t, s, "the heartbeat of "+blocked)
	for _, h := range beating {
		wg.Go(func() { beat(h) })
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if b, _ := s.Queued(0); b == queued {
			break
		}
		if time.Now().After(deadline) {
			b, _ := s.Queued(0)
			t.Fatalf("the heartbeats never queued: %d wait", b)
		}
	}
	// A connect on a host whose heartbeat waits in the queue.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := s.CommitPlacement(wctx, placement("p", beating[len(beating)/2], "alice", 10))
	cancel()
	if err != nil {
		t.Fatalf("a connect while %d heartbeats wait behind a held lock: %v", queued, err)
	}
	if b, _ := s.Queued(0); b != queued {
		t.Errorf("%d heartbeats wait after the connect; want all %d (their committer waits for %s's lock)", b, queued, blocked)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if bad, err := s.CheckCounts(ctx); err != nil || len(bad) > 0 {
		t.Errorf("counts: %v %v", bad, err)
	}
}

// A logon storm does not starve the heartbeats: with more connects queued
// than one batch takes, each batch still carries heartbeats (a host whose
// heartbeats wait 90 s goes Unavailable and takes no more sessions).
func TestBatchesKeepRoomForHeartbeats(t *testing.T) {
	each(t, func(t *testing.T, s *store.DB) {
		beats, first := s.FillFromFullQueues(400, 400)
		if beats == 0 || first == 0 || beats+first > 256 {
			t.Fatalf("a batch from 400 queued connects and 400 queued heartbeats took %d connects and %d heartbeats; want both kinds, at most 256 in all", first, beats)
		}
		t.Logf("a batch from full queues: %d connects, %d heartbeats", first, beats)
	})
}
