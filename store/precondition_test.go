package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// kinds are the four objects with an ETag (R-E13), each with what a test
// does to one: create it at t0 (unconditionally), read its update time
// (ok false when it is not there), replace it and delete it with a
// precondition.
type kind struct {
	name   string
	create func(t *testing.T, s *store.DB)
	read   func(s *store.DB) (time.Time, bool)
	write  func(s *store.DB, pre vdibroker.Precondition) error
	delete func(s *store.DB, pre vdibroker.Precondition) error
}

func etagKinds(t *testing.T, s *store.DB) []kind {
	ctx := t.Context()
	mustPool(t, s, pool("parent", vdibroker.Pooled))
	mustAppGroup(t, s, appGroup("parent-apps", "parent", vdibroker.AppGroupRemoteApp, vdibroker.Assignments{}))
	app := func() *vdibroker.Application {
		return &vdibroker.Application{Name: "paint", ApplicationGroup: "parent-apps", FilePath: "mspaint.exe",
			CommandLineSetting: vdibroker.CommandLineDoNotAllow, CreateTime: t0, UpdateTime: t0}
	}
	grp := func() *vdibroker.ApplicationGroup {
		return appGroup("x-apps", "parent", vdibroker.AppGroupRemoteApp, vdibroker.Assignments{Users: []string{"alice"}})
	}
	pl := func() *vdibroker.ScalingPlan { return plan("x-plan", "parent") }
	must := func(t *testing.T, _ bool, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	at := func(ut time.Time, err error) (time.Time, bool) {
		if vdibroker.ErrorCode(err) == vdibroker.ENotFound {
			return time.Time{}, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return ut, true
	}
	none := vdibroker.Precondition{}
	return []kind{
		{"host pool",
			func(t *testing.T, s *store.DB) {
				c, err := s.PutHostPool(ctx, pool("x-pool", vdibroker.Pooled), none)
				must(t, c, err)
			},
			func(s *store.DB) (time.Time, bool) {
				p, err := s.GetHostPool(ctx, "x-pool")
				return at(ptime(p, err), err)
			},
			func(s *store.DB, pre vdibroker.Precondition) error {
				_, err := s.UpdateHostPool(ctx, "x-pool", func(p *vdibroker.HostPool) error { p.Description += "+"; return nil }, pre)
				return err
			},
			func(s *store.DB, pre vdibroker.Precondition) error {
				_, err := s.DeleteHostPool(ctx, "x-pool", false, pre)
				return err
			}},
		{"application group",
			func(t *testing.T, s *store.DB) { c, err := s.PutApplicationGroup(ctx, grp(), none); must(t, c, err) },
			func(s *store.DB) (time.Time, bool) {
				g, err := s.GetApplicationGroup(ctx, "x-apps")
				return at(gtime(g, err), err)
			},
			func(s *store.DB, pre vdibroker.Precondition) error {
				_, err := s.PutApplicationGroup(ctx, grp(), pre)
				return err
			},
			func(s *store.DB, pre vdibroker.Precondition) error {
				return s.DeleteApplicationGroup(ctx, "x-apps", pre)
			}},
		{"application",
			func(t *testing.T, s *store.DB) { c, err := s.PutApplication(ctx, app(), none); must(t, c, err) },
			func(s *store.DB) (time.Time, bool) {
				a, err := s.GetApplication(ctx, "parent-apps", "paint")
				return at(atime(a, err), err)
			},
			func(s *store.DB, pre vdibroker.Precondition) error {
				_, err := s.PutApplication(ctx, app(), pre)
				return err
			},
			func(s *store.DB, pre vdibroker.Precondition) error {
				return s.DeleteApplication(ctx, "parent-apps", "paint", pre)
			}},
		{"scaling plan",
			func(t *testing.T, s *store.DB) { c, err := s.PutScalingPlan(ctx, pl(), none); must(t, c, err) },
			func(s *store.DB) (time.Time, bool) {
				p, err := s.GetScalingPlan(ctx, "x-plan")
				return at(stime(p, err), err)
			},
			func(s *store.DB, pre vdibroker.Precondition) error {
				_, err := s.PutScalingPlan(ctx, pl(), pre)
				return err
			},
			func(s *store.DB, pre vdibroker.Precondition) error { return s.DeleteScalingPlan(ctx, "x-plan", pre) }},
	}
}

func ptime(p *vdibroker.HostPool, err error) time.Time {
	if err != nil {
		return time.Time{}
	}
	return p.UpdateTime
}

func gtime(g *vdibroker.ApplicationGroup, err error) time.Time {
	if err != nil {
		return time.Time{}
	}
	return g.UpdateTime
}

func atime(a *vdibroker.Application, err error) time.Time {
	if err != nil {
		return time.Time{}
	}
	return a.UpdateTime
}

func stime(p *vdibroker.ScalingPlan, err error) time.Time {
	if err != nil {
		return time.Time{}
	}
	return p.UpdateTime
}

func ifMatch(ut time.Time) vdibroker.Precondition {
	return vdibroker.Precondition{Exists: true, Versions: []time.Time{ut}}
}

// TestConditionalDelete_RE13: a delete with If-Match of a host pool, an
// application group, an application or a scaling plan deletes only the
// object read: with a tag it no longer has it is PreconditionFailed and
// the object stays; of one that is not there (If-Match: * or a tag) it is
// PreconditionFailed, as a PUT's, and without If-Match NotFound; with
// the current tag it deletes. Deletes racing a write through two stores
// on one database (two replicas), each with the tag read before: either
// the write lands first and the delete is refused, or the delete lands
// and the write finds nothing; never both.
func TestConditionalDelete_RE13(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		a, b := tg.open(t, store.Options{}), tg.open(t, store.Options{})
		for _, k := range etagKinds(t, a) {
			k.create(t, a)
			read, _ := k.read(a)
			if err := k.write(a, ifMatch(read)); err != nil {
				t.Fatalf("%s: write: %v", k.name, err)
			}
			now, _ := k.read(a)
			if err := k.delete(a, ifMatch(read)); vdibroker.ErrorCode(err) != vdibroker.EPreconditionFailed ||
				!strings.Contains(vdibroker.ErrorMessage(err), "changed since it was read") {
				t.Errorf("%s: delete with a stale If-Match: %v, want PreconditionFailed", k.name, err)
			}
			if _, ok := k.read(a); !ok {
				t.Errorf("%s: deleted by the refused delete", k.name)
			}
			if err := k.delete(b, ifMatch(now)); err != nil {
				t.Errorf("%s: delete with the current If-Match: %v", k.name, err)
			}
			if _, ok := k.read(a); ok {
				t.Errorf("%s: still there after its delete", k.name)
			}
			for _, pre := range []vdibroker.Precondition{{Exists: true}, ifMatch(now)} {
				if err := k.delete(a, pre); vdibroker.ErrorCode(err) != vdibroker.EPreconditionFailed ||
					!strings.Contains(vdibroker.ErrorMessage(err), "does not exist") {
					t.Errorf("%s: delete with If-Match of a missing one: %v, want PreconditionFailed", k.name, err)
				}
			}
			if err := k.delete(a, vdibroker.Precondition{}); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
				t.Errorf("%s: delete of a missing one: %v, want NotFound", k.name, err)
			}

			// A write and a delete of the same read race.
			for round := range 3 {
				k.create(t, a)
				read, _ := k.read(a)
				var wg sync.WaitGroup
				var werr, derr error
				wg.Go(func() { werr = k.write(a, ifMatch(read)) })
				wg.Go(func() { derr = k.delete(b, ifMatch(read)) })
				wg.Wait()
				_, there := k.read(a)
				switch {
				case werr == nil && derr == nil:
					t.Errorf("%s round %d: both the write and the delete of one read landed", k.name, round)
				case werr == nil:
					if !there || vdibroker.ErrorCode(derr) != vdibroker.EPreconditionFailed {
						t.Errorf("%s round %d: the write landed, the delete %v, there %v", k.name, round, derr, there)
					}
				case derr == nil:
					if there || vdibroker.ErrorCode(werr) != vdibroker.EPreconditionFailed {
						t.Errorf("%s round %d: the delete landed, the write %v, there %v", k.name, round, werr, there)
					}
				default:
					t.Errorf("%s round %d: neither landed: %v, %v", k.name, round, werr, derr)
				}
				if there {
					if err := k.delete(a, vdibroker.Precondition{}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	})
}

// TestRecreatedNewETag_RE13: an object deleted and created again, by a
// replica whose clock reads what the first one's did (t0: a clock behind,
// stepped back, or of coarse ticks), has an update time of its own: a
// write with the tag read before the delete is PreconditionFailed and
// changes nothing, on each of the four kinds.
func TestRecreatedNewETag_RE13(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		a, b := tg.open(t, store.Options{}), tg.open(t, store.Options{})
		for _, k := range etagKinds(t, a) {
			k.create(t, a)
			old, _ := k.read(a)
			if err := k.delete(a, vdibroker.Precondition{}); err != nil {
				t.Fatal(err)
			}
			k.create(t, b) // at t0 again
			again, _ := k.read(b)
			if again.Equal(old) {
				t.Errorf("%s: created again with the deleted one's update time %v: its ETag matches a tag read before", k.name, old)
			}
			if err := k.write(a, ifMatch(old)); vdibroker.ErrorCode(err) != vdibroker.EPreconditionFailed {
				t.Errorf("%s: write with the deleted one's tag: %v, want PreconditionFailed", k.name, err)
			}
			if now, _ := k.read(a); !now.Equal(again) {
				t.Errorf("%s: the refused write changed it (%v, was %v)", k.name, now, again)
			}
		}
	})
}

// TestUpdateHostPoolAtomic_RE13: PATCHes of a pool (UpdateHostPool)
// through two stores on one database: without If-Match each changes its
// own field on the pool as its transaction reads it, so every change
// lands (none lost, as a read, change and whole write would lose); with
// the If-Match of one read exactly one lands and the others are
// PreconditionFailed.
func TestUpdateHostPoolAtomic_RE13(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		a, b := tg.open(t, store.Options{}), tg.open(t, store.Options{})
		ctx := t.Context()
		mustPool(t, a, pool("shared", vdibroker.Pooled))
		const n = 6
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			s := []*store.DB{a, b}[i%2]
			wg.Go(func() {
				_, errs[i] = s.UpdateHostPool(ctx, "shared", func(p *vdibroker.HostPool) error {
					p.Description += fmt.Sprintf("[%d]", i)
					return nil
				}, vdibroker.Precondition{})
			})
		}
		wg.Wait()
		got, err := a.GetHostPool(ctx, "shared")
		if err != nil {
			t.Fatal(err)
		}
		for i, err := range errs {
			if err != nil || !strings.Contains(got.Description, fmt.Sprintf("[%d]", i)) {
				t.Errorf("PATCH %d: %v; description %q, want every PATCH's part", i, err, got.Description)
			}
		}
		read := got.UpdateTime
		for i := range n {
			s := []*store.DB{a, b}[i%2]
			wg.Go(func() {
				_, errs[i] = s.UpdateHostPool(ctx, "shared", func(p *vdibroker.HostPool) error {
					p.FriendlyName = fmt.Sprintf("writer %d", i)
					return nil
				}, ifMatch(read))
			})
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch vdibroker.ErrorCode(err) {
			case "":
				won++
			case vdibroker.EPreconditionFailed:
			default:
				t.Errorf("PATCH %d with If-Match: %v", i, err)
			}
		}
		if won != 1 {
			t.Errorf("%d PATCHes with the If-Match of one read landed, want 1", won)
		}
	})
}

// holdETagClock begins a transaction of its own on dsn's database that
// holds the etag_clock row (as an admin write of another replica does
// while it commits), until the test commits or rolls it back.
func holdETagClock(t *testing.T, dsn string) *sql.Tx {
	t.Helper()
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	tx, err := raw.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if _, err := tx.ExecContext(t.Context(), `SELECT last FROM etag_clock WHERE id = 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	return tx
}

// TestDeletePoolInPlanLockOrder_RE13 (PostgreSQL): the delete of a pool
// in a scaling plan takes the etag_clock row (the plan's update time)
// only after it holds what an admin write that also takes it holds
// first: the pool's application groups (a PutApplication or a
// DeleteApplication locks its group, then the clock, which moves the
// group's update time) and its plan's pool row (a PutScalingPlan that
// drops the pool takes the clock, then the plan, then its pool rows).
// Each of these, queued behind the delete for the clock, used to hold
// what the delete needed next: a deadlock PostgreSQL broke only after
// deadlock_timeout, running one again. Now the other write waits for the
// delete and then finds the group, or the pool, gone; nothing is run
// again.
func TestDeletePoolInPlanLockOrder_RE13(t *testing.T) {
	dsn := postgresSchemaDSN(t)
	a, b, retries := twoReplicasOn(t, dsn)
	ctx := t.Context()
	none := vdibroker.Precondition{}
	for round, other := range []struct {
		name  string
		write func() error
	}{
		{"PutApplication", func() error {
			_, err := b.PutApplication(ctx, &vdibroker.Application{Name: "paint", ApplicationGroup: "pool-p0-apps", FilePath: "mspaint2.exe",
				CommandLineSetting: vdibroker.CommandLineDoNotAllow, CreateTime: t0, UpdateTime: t0}, none)
			return err
		}},
		{"PutScalingPlan without the pool", func() error {
			_, err := b.PutScalingPlan(ctx, plan("plan1", "pool-q1"), none)
			return err
		}},
		// An application's delete moves its group's update time, so it
		// takes the clock too: its group's row first, as PutApplication.
		{"DeleteApplication", func() error {
			return b.DeleteApplication(ctx, "pool-p2-apps", "paint", none)
		}},
	} {
		p, q := fmt.Sprintf("pool-p%d", round), fmt.Sprintf("pool-q%d", round)
		mustPool(t, a, pool(p, vdibroker.Pooled))
		mustPool(t, a, pool(q, vdibroker.Pooled))
		if _, err := a.PutScalingPlan(ctx, plan(fmt.Sprintf("plan%d", round), p, q), none); err != nil {
			t.Fatal(err)
		}
		mustAppGroup(t, a, appGroup(p+"-apps", p, vdibroker.AppGroupRemoteApp, vdibroker.Assignments{}))
		if _, err := a.PutApplication(ctx, &vdibroker.Application{Name: "paint", ApplicationGroup: p + "-apps", FilePath: "mspaint.exe",
			CommandLineSetting: vdibroker.CommandLineDoNotAllow, CreateTime: t0, UpdateTime: t0}, none); err != nil {
			t.Fatal(err)
		}
		clock := holdETagClock(t, dsn)
		del, put := make(chan error, 1), make(chan error, 1)
		go func() {
			_, err := a.DeleteHostPool(context.WithoutCancel(ctx), p, true, none)
			del <- err
		}()
		waitForLockWaiter(t, a, "the delete of "+p)
		go func() { put <- other.write() }()
		waitForLockWaiters(t, a, 2, other.name+", behind the delete")
		if err := clock.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-del; err != nil {
			t.Errorf("%s: delete of %s: %v", other.name, p, err)
		}
		err := <-put
		switch round {
		case 0, 2:
			if vdibroker.ErrorCode(err) != vdibroker.ENotFound {
				t.Errorf("%s of the deleted pool's group: %v, want NotFound", other.name, err)
			}
			if _, err := a.GetApplication(ctx, p+"-apps", "paint"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
				t.Errorf("the deleted pool's application: %v, want NotFound", err)
			}
		case 1:
			if err != nil {
				t.Errorf("%s: %v", other.name, err)
			}
			if got, err := a.GetScalingPlan(ctx, "plan1"); err != nil || fmt.Sprint(got.HostPools) != "["+q+"]" {
				t.Errorf("the plan after: %v, %v; want [%s]", got, err, q)
			}
		}
	}
	// (The plan's write runs again once, as it should: the delete changed
	// the plan after it read it.)
	if n := retries.locks.Load(); n != 0 {
		t.Errorf("%d writes were run again after a deadlock or serialization failure, want none: %s", n, retries.first.Load())
	}
}
