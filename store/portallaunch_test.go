package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

func portalLaunch(id, owner string, created time.Time) *vdibroker.PortalLaunch {
	return &vdibroker.PortalLaunch{IDHash: id, Owner: owner, Name: "Office desktop", State: "waiting",
		CreateTime: created, ExpireTime: created.Add(time.Minute)}
}

// TestPortalLaunches (R-U7): a launch made on one store handle (a
// replica) is read and updated on another, only by its owner, until it
// expires; it is taken once, only when ready; the bounds per owner and
// in all hold under concurrent creations on two handles, and expired
// launches make room (they are deleted when a launch is made).
func TestPortalLaunches(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		a, b := tg.open(t, store.Options{}), tg.open(t, store.Options{})
		ctx := t.Context()
		if err := a.CreatePortalLaunch(ctx, portalLaunch("l1", "alice", t0), 3, 100, t0); err != nil {
			t.Fatal(err)
		}
		if _, err := b.PortalLaunch(ctx, "l1", "bob", t0); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("another owner reads it: %v", err)
		}
		if _, err := b.TakePortalLaunch(ctx, "l1", "alice", t0); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("taken while waiting: %v", err)
		}
		l, err := b.PortalLaunch(ctx, "l1", "alice", t0)
		if err != nil || l.State != "waiting" || l.Starting || !l.Until.IsZero() {
			t.Fatalf("read on another handle: %+v, %v", l, err)
		}
		l.Starting, l.Host, l.Until = true, "cold-1", t0.Add(time.Minute)
		if err := b.UpdatePortalLaunch(ctx, l); err != nil {
			t.Fatal(err)
		}
		if got, _ := a.PortalLaunch(ctx, "l1", "alice", t0); !got.Starting || got.Host != "cold-1" || !got.Until.Equal(t0.Add(time.Minute)) {
			t.Errorf("progress on the other handle: %+v", got)
		}
		l.State, l.Sealed, l.ExpireTime = "ready", []byte("sealed file"), t0.Add(2*time.Minute)
		if err := a.UpdatePortalLaunch(ctx, l); err != nil {
			t.Fatal(err)
		}
		if _, err := b.TakePortalLaunch(ctx, "l1", "bob", t0); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("taken by another owner: %v", err)
		}
		if _, err := b.TakePortalLaunch(ctx, "l1", "alice", t0.Add(2*time.Minute)); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("taken at its expiry: %v", err)
		}
		got, err := b.TakePortalLaunch(ctx, "l1", "alice", t0)
		if err != nil || string(got.Sealed) != "sealed file" || got.Name != "Office desktop" {
			t.Fatalf("take: %+v, %v", got, err)
		}
		if _, err := a.TakePortalLaunch(ctx, "l1", "alice", t0); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("taken twice: %v", err)
		}

		// 20 creations of one owner at once on two handles: 3 (its bound)
		// succeed; then the pod's bound of 5.
		var wg sync.WaitGroup
		var mu sync.Mutex
		made := 0
		for i := range 20 {
			st := a
			if i%2 == 1 {
				st = b
			}
			wg.Go(func() {
				err := st.CreatePortalLaunch(ctx, portalLaunch(fmt.Sprint("c", i), "carol", t0), 3, 5, t0)
				if err == nil {
					mu.Lock()
					made++
					mu.Unlock()
				} else if vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests {
					t.Errorf("creation %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		if made != 3 {
			t.Errorf("%d of carol's launches made, want 3 (per-owner bound)", made)
		}
		for _, id := range []string{"d1", "d2"} {
			if err := a.CreatePortalLaunch(ctx, portalLaunch(id, "dave", t0), 3, 5, t0); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.CreatePortalLaunch(ctx, portalLaunch("d3", "dave", t0), 3, 5, t0); vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests {
			t.Errorf("beyond the pod's bound of 5: %v, want TooManyRequests", err)
		}
		// A minute on, all have expired: room again, and the expired rows
		// are gone.
		later := t0.Add(time.Minute)
		if err := b.CreatePortalLaunch(ctx, portalLaunch("d3", "dave", later), 3, 5, later); err != nil {
			t.Fatalf("after the others expired: %v", err)
		}
		if _, err := a.PortalLaunch(ctx, "d1", "dave", t0); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
			t.Errorf("an expired launch kept after a creation: %v", err)
		}
	})
}

// TestPortalLaunchCountMigrationRacesLaunch_RU7 (PostgreSQL): migration
// 00068 counts the launches the pod keeps while replicas of the release
// before (which make and take launches without the count's triggers) may
// still run. A launch such a replica has inserted and not yet committed
// must be counted once it commits: the migration waits for it before it
// counts. Counted before the triggers exist and committed after, the
// launch was in no count, ever, and the pod's bound held one more.
func TestPortalLaunchCountMigrationRacesLaunch_RU7(t *testing.T) {
	s, dsn := postgresStore(t)
	ctx := t.Context()
	if err := s.MigrateDownTo(ctx, 67); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	old, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { old.Rollback() })
	// The old release's launch, as its CreatePortalLaunch inserts it.
	if _, err := old.ExecContext(ctx, `INSERT INTO portal_launches (id_hash, owner, name, state, create_time, expire_time)
		VALUES ('old-1', 'erin', 'Office desktop', 'waiting', $1, $2)`, t0.UnixNano(), t0.Add(time.Minute).UnixNano()); err != nil {
		t.Fatal(err)
	}
	type opened struct {
		s   *store.DB
		err error
	}
	up := make(chan opened, 1)
	go func() {
		s, err := store.OpenWith(context.WithoutCancel(ctx), dsn, "", nil, store.Options{})
		up <- opened{s, err}
	}()
	waitForLockWaiter(t, s, "migration 00068, for the old release's launch")
	if err := old.Commit(); err != nil {
		t.Fatal(err)
	}
	o := <-up
	if o.err != nil {
		t.Fatal(o.err)
	}
	t.Cleanup(func() { o.s.Close() })
	if n, err := o.s.QueryInt(ctx, `SELECT n FROM portal_launch_count WHERE id = 1`); err != nil || n != 1 {
		t.Errorf("the count after the migration: %d, %v; want 1 (the launch committed meanwhile)", n, err)
	}
	// The bound of 1 is full: the old release's launch is kept.
	if err := o.s.CreatePortalLaunch(ctx, portalLaunch("new-1", "frank", t0), 3, 1, t0); vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests {
		t.Errorf("a launch beyond the pod's bound of 1: %v, want TooManyRequests", err)
	}
}

// TestPortalLaunchesFailedHoldNoSlot (R-U7): an owner's failed launches
// do not count against its launches at once; a creation keeps only its
// newest perOwner-1 failed ones (another owner's stay), so its rows stay
// bounded.
func TestPortalLaunchesFailedHoldNoSlot(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		st := tg.open(t, store.Options{})
		ctx := t.Context()
		fail := func(id, owner string, at time.Time) {
			t.Helper()
			if err := st.CreatePortalLaunch(ctx, portalLaunch(id, owner, at), 2, 100, t0); err != nil {
				t.Fatalf("create %s: %v", id, err)
			}
			l, err := st.PortalLaunch(ctx, id, owner, t0)
			if err != nil {
				t.Fatal(err)
			}
			l.State = "failed"
			if err := st.UpdatePortalLaunch(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		fail("bob-f", "bob", t0)
		for i := range 3 {
			fail(fmt.Sprint("f", i), "alice", t0.Add(time.Duration(i)*time.Second))
		}
		// f0 went when f2 was made; f1, the newest failed then, stays.
		for id, want := range map[string]string{"f0": vdibroker.ENotFound, "f1": "", "f2": "", "bob-f": ""} {
			owner := "alice"
			if id == "bob-f" {
				owner = "bob"
			}
			if _, err := st.PortalLaunch(ctx, id, owner, t0); vdibroker.ErrorCode(err) != want {
				t.Errorf("%s: %v, want %q", id, err, want)
			}
		}
		// Two under way: her bound of 2 holds.
		for _, id := range []string{"w1", "w2"} {
			if err := st.CreatePortalLaunch(ctx, portalLaunch(id, "alice", t0), 2, 100, t0); err != nil {
				t.Fatalf("create %s with failed ones kept: %v", id, err)
			}
		}
		if err := st.CreatePortalLaunch(ctx, portalLaunch("w3", "alice", t0), 2, 100, t0); vdibroker.ErrorCode(err) != vdibroker.ETooManyRequests {
			t.Errorf("a third with two under way: %v, want TooManyRequests", err)
		}
	})
}

// TestPortalLaunchesKeepTheLatestFailed (R-U7): of an owner's failed
// launches a creation keeps those that failed last, not those begun
// last: a desktop she waited minutes for, while a host started, that
// failed after two quick failures begun since, keeps its page (her
// helpdesk's reference with it).
func TestPortalLaunchesKeepTheLatestFailed(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		st := tg.open(t, store.Options{})
		ctx := t.Context()
		fail := func(id string, created, ended time.Time) {
			t.Helper()
			l := portalLaunch(id, "alice", created)
			l.ExpireTime = created.Add(10 * time.Minute)
			if err := st.CreatePortalLaunch(ctx, l, 3, 100, created); err != nil {
				t.Fatalf("create %s: %v", id, err)
			}
			l.State, l.ExpireTime = "failed", ended.Add(2*time.Minute)
			if err := st.UpdatePortalLaunch(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		waited := portalLaunch("waited", "alice", t0)
		waited.ExpireTime = t0.Add(10 * time.Minute)
		if err := st.CreatePortalLaunch(ctx, waited, 3, 100, t0); err != nil {
			t.Fatal(err)
		}
		fail("quick1", t0.Add(4*time.Minute), t0.Add(4*time.Minute+time.Second))
		fail("quick2", t0.Add(4*time.Minute+10*time.Second), t0.Add(4*time.Minute+11*time.Second))
		waited.State, waited.ExpireTime = "failed", t0.Add(5*time.Minute+2*time.Minute)
		if err := st.UpdatePortalLaunch(ctx, waited); err != nil {
			t.Fatal(err)
		}
		now := t0.Add(5 * time.Minute)
		if err := st.CreatePortalLaunch(ctx, portalLaunch("next", "alice", now), 3, 100, now); err != nil {
			t.Fatal(err)
		}
		for id, want := range map[string]string{"waited": "", "quick2": "", "quick1": vdibroker.ENotFound} {
			if _, err := st.PortalLaunch(ctx, id, "alice", now); vdibroker.ErrorCode(err) != want {
				t.Errorf("%s: %v, want %q", id, err, want)
			}
		}
	})
}
