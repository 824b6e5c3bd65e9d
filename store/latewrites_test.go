package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// R-G1, R-OUT3: a session late by its transaction's clock is counted in
// the transaction that writes it, on every engine: the batch commits one
// transaction, and a count that cannot be written fails the session's
// commit too (it never commits uncounted, whatever then stops or fails).
// A prompt commit writes no count, so it commits whatever the count.
func TestLateCountCommittedWithSession_RG1(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		s := newLateStore(t, tg)
		ctx := t.Context()
		late := int64(vdibroker.LateCommit + 500*time.Millisecond)
		s.ahead.Store(late)
		before := s.WriterCommits()
		mustCommit(t, s.DB, madeAt(placement("p", "h1", "late", 10), s.base))
		if got := s.WriterCommits() - before; got != 1 || s.count() != 1 {
			t.Fatalf("a late commit: %d transactions committed, count %d; want 1 and 1 (the count in the session's)", got, s.count())
		}
		s.failLateCount()
		refused := madeAt(placement("p", "h2", "refused", 10), s.base)
		if err := s.CommitPlacement(ctx, refused); err == nil {
			t.Fatal("a late commit whose count failed committed")
		}
		outage := placement("p", "h2", "outage", 10)
		outage.OutagePlacement = true
		if err := s.CommitPlacement(ctx, outage); err == nil {
			t.Fatal("an outage placement whose count failed committed")
		}
		for _, c := range []*vdibroker.PlacementCommit{refused, outage} {
			if list, err := s.ListUserSessions(ctx, vdibroker.SessionFilter{HostPool: "p", User: c.Session.User}); err != nil || len(list) != 0 {
				t.Errorf("%s's sessions after the failed count: %d, %v; want none", c.Session.User, len(list), err)
			}
		}
		s.ahead.Store(0)
		mustCommit(t, s.DB, madeAt(placement("p", "h2", "prompt", 10), s.base))
		s.unfailLateCount()
		if n := s.count(); n != 1 {
			t.Errorf("after the failed late commits and a prompt one: %d, want 1", n)
		}
	})
}

// R-G1, R-OUT3 (PostgreSQL): each committer counts its late writes on a
// row of its own, so a committer's late batch never waits for another's,
// of its replica or of another, however long that one takes to commit
// (one row shared made every late batch of every committer and replica
// commit one at a time, each holding its hosts meanwhile, just when the
// store was slow). Here committer 0's row is held as its batch holds it
// from its bump to its commit; a late batch and an outage placement of
// another committer, and a late batch of another replica, commit
// meanwhile; only committer 0's own next late batch waits for it.
func TestLateCountRowPerCommitter_RG1(t *testing.T) {
	dsn := postgresSchemaDSN(t)
	base := time.Now()
	clock := store.Options{Now: func() time.Time { return base.Add(time.Minute) }} // every session late
	a, err := store.OpenWith(t.Context(), dsn, "", nil, clock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := store.OpenWith(t.Context(), dsn, "", nil, clock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx := t.Context()
	mustPool(t, a, pool("p", vdibroker.Pooled))
	hosts := map[int]string{} // a host of committers 0 and 1
	for i := 0; len(hosts) < 2; i++ {
		name := fmt.Sprintf("h%d", i)
		if c := a.CommitterOf("p", name); c < 2 && hosts[c] == "" {
			hosts[c] = name
			mustHost(t, a, "p", name)
		}
	}
	release, err := a.HoldLateCount(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	late := func(s *store.DB, host, user string) func() error {
		return func() error { return s.CommitPlacement(ctx, madeAt(placement("p", host, user, 10), base)) }
	}
	outage := placement("p", hosts[1], "outage", 10)
	outage.OutagePlacement = true
	for _, c := range []struct {
		name   string
		commit func() error
	}{
		{"a late commit of another committer", late(a, hosts[1], "alice")},
		{"an outage placement of another committer", func() error { return a.CommitPlacement(ctx, outage) }},
		{"a late commit of another replica", late(b, hosts[0], "bob")},
	} {
		if err := commitsWithoutWaiting(t, a, c.name, c.commit); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
	// Committer 0's own: it waits for its row (its batches run one after
	// another anyway).
	own := make(chan error, 1)
	go func() { own <- late(a, hosts[0], "carol")() }()
	waitForLockWaiter(t, a, "committer 0's late batch, for its count")
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := <-own; err != nil {
		t.Fatal(err)
	}
	if n, err := a.LateSessionWrites(ctx); err != nil || n != 5 {
		t.Errorf("the count: %d, %v; want 5 (the held bump and four late writes)", n, err)
	}
}

// commitsWithoutWaiting runs commit and returns its outcome; the test
// fails if a transaction of the store's (or of another store on its
// schema) waits for a lock meanwhile.
func commitsWithoutWaiting(t *testing.T, s *store.DB, name string, commit func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- commit() }()
	for {
		select {
		case err := <-done:
			return err
		default:
		}
		n, err := s.QueryInt(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = current_setting('application_name') AND wait_event_type = 'Lock'`)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			t.Fatalf("%s waits for a lock another committer holds", name)
		}
		time.Sleep(time.Millisecond)
	}
}

// R-G1: the rows of late_session_writes stay as many as the committers of
// the opens of the last hour: an open folds the rows not bumped for an
// hour into row 1, and the count, their sum, stays as it was, whether
// the fold commits or fails (one transaction); a committer whose row was
// folded counts on. A bump of row 1 (a replica older than the table,
// during a rolling upgrade) is counted too, and going back below the
// table keeps the count in row 1.
func TestLateWritesFolded_RG1(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		s := newLateStore(t, tg)
		ctx := t.Context()
		rows := func() int {
			t.Helper()
			n, err := s.QueryInt(ctx, `SELECT COUNT(*) FROM late_session_writes`)
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
		fold := func(before time.Time) int {
			t.Helper()
			n, err := s.FoldLateWrites(ctx, before)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		late := func(host, user string, at time.Duration) *vdibroker.PlacementCommit {
			return madeAt(placement("p", host, user, 10), s.base.Add(at-time.Minute))
		}
		// A minute ahead: every commit is late. Two committers' rows: the
		// store's (h1's) and a test batch's.
		s.ahead.Store(int64(time.Minute))
		mustCommit(t, s.DB, late("h1", "alice", 0))
		if errs := s.CommitBatch([]*vdibroker.PlacementCommit{late("h2", "bob", 0)}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		if err := s.ExecRaw(ctx, `UPDATE outage_placement_writes SET writes = writes + 1 WHERE id = 1`); err != nil {
			t.Fatal(err)
		}
		if n, r := s.count(), rows(); n != 3 || r != 2 {
			t.Fatalf("two late commits on two committers and an older replica's bump: count %d, %d rows; want 3 and 2", n, r)
		}
		if n := fold(s.base); n != 0 || rows() != 2 {
			t.Fatalf("folding the rows bumped before them: %d folded, %d rows; want none", n, rows())
		}
		// Two hours on, a third committer's late commit; the first two
		// rows are an hour unbumped.
		s.ahead.Store(int64(2 * time.Hour))
		if errs := s.CommitBatch([]*vdibroker.PlacementCommit{late("h2", "carol", 2*time.Hour)}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		hourAgo := s.base.Add(time.Hour)
		// A fold that fails halfway (row 1 cannot be written) leaves all.
		failOne, unfailOne := `CREATE TRIGGER one_fails BEFORE UPDATE ON outage_placement_writes BEGIN SELECT RAISE(ABORT, 'row 1 fails'); END`,
			`DROP TRIGGER one_fails`
		if tg.name == "postgres" {
			failOne, unfailOne = `ALTER TABLE outage_placement_writes ADD CONSTRAINT one_fails CHECK (writes < 0) NOT VALID`,
				`ALTER TABLE outage_placement_writes DROP CONSTRAINT one_fails`
		}
		if err := s.ExecRaw(ctx, failOne); err != nil {
			t.Fatal(err)
		}
		if _, err := s.FoldLateWrites(ctx, hourAgo); err == nil {
			t.Fatal("a fold that could not write row 1 succeeded")
		}
		if err := s.ExecRaw(ctx, unfailOne); err != nil {
			t.Fatal(err)
		}
		if n, r := s.count(), rows(); n != 4 || r != 3 {
			t.Fatalf("after a failed fold: count %d, %d rows; want 4 and 3 (nothing folded)", n, r)
		}
		if n := fold(hourAgo); n != 2 {
			t.Fatalf("folded %d rows, want the two an hour unbumped", n)
		}
		if n, r := s.count(), rows(); n != 4 || r != 1 {
			t.Fatalf("after the fold: count %d, %d rows; want 4 (as before) and 1", n, r)
		}
		// The store's committer, its row folded, counts on.
		mustCommit(t, s.DB, late("h1", "dave", 2*time.Hour))
		if n, r := s.count(), rows(); n != 5 || r != 2 {
			t.Fatalf("after a late commit of a folded committer: count %d, %d rows; want 5 and 2", n, r)
		}
		// An open three hours on folds the rest.
		s.ahead.Store(int64(3*time.Hour + time.Minute))
		reopened := tg.open(t, store.Options{Now: func() time.Time { return s.base.Add(time.Duration(s.ahead.Load())) }})
		if n, r := s.count(), rows(); n != 5 || r != 0 {
			t.Fatalf("after an open three hours on: count %d, %d rows; want 5 and none", n, r)
		}
		mustCommit(t, reopened, late("h2", "erin", 3*time.Hour+time.Minute))
		if n, err := reopened.LateSessionWrites(ctx); err != nil || n != 6 {
			t.Fatalf("after a late commit of the reopened store: %d, %v; want 6", n, err)
		}
		// Back below the table: row 1 keeps the count.
		if err := reopened.MigrateDownTo(context.WithoutCancel(ctx), 62); err != nil {
			t.Fatal(err)
		}
		if n, err := s.QueryInt(ctx, `SELECT writes FROM outage_placement_writes WHERE id = 1`); err != nil || n != 6 {
			t.Errorf("row 1 after migrating down: %d, %v; want 6", n, err)
		}
	})
}

// R-G1 (PostgreSQL, READ COMMITTED): a fold racing a committer's bump
// keeps the count whole. The fold reads a row unbumped for an hour; the
// committer bumps it meanwhile and holds it until its commit; the fold,
// which waits for it, finds it bumped since and leaves it (a fold that
// took the rows it read before deleting them would move the old count
// into row 1 and delete the new one with it, and the count would go
// down).
func TestLateWritesFoldRacesBump_RG1(t *testing.T) {
	dsn := postgresSchemaDSN(t)
	base := time.Now()
	var ahead atomic.Int64
	ahead.Store(int64(time.Minute)) // every session late
	s, err := store.OpenWith(t.Context(), dsn, "", nil, store.Options{Now: func() time.Time { return base.Add(time.Duration(ahead.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	mustPool(t, s, pool("p", vdibroker.Pooled))
	host := ""
	for i := 0; host == ""; i++ {
		if name := fmt.Sprintf("h%d", i); s.CommitterOf("p", name) == 0 {
			host = name
			mustHost(t, s, "p", name)
		}
	}
	mustCommit(t, s, madeAt(placement("p", host, "alice", 10), base))
	// Two hours on: committer 0's row is an hour unbumped, and it bumps
	// it again, holding it.
	ahead.Store(int64(2 * time.Hour))
	release, err := s.HoldLateCount(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	type result struct {
		folded int
		err    error
	}
	fold := make(chan result, 1)
	go func() {
		n, err := s.FoldLateWrites(ctx, base.Add(time.Hour))
		fold <- result{n, err}
	}()
	waitForLockWaiter(t, s, "the fold, for committer 0's row")
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if r := <-fold; r.err != nil || r.folded != 0 {
		t.Fatalf("the fold of a row bumped while it waited: %d folded, %v; want none", r.folded, r.err)
	}
	if n, err := s.LateSessionWrites(ctx); err != nil || n != 2 {
		t.Fatalf("the count: %d, %v; want 2 (the late commit and the held bump)", n, err)
	}
}

// R-G1 (PostgreSQL): going back below late_session_writes (a rollback,
// while replicas of this version still run) moves every bump into row
// 1, a bump whose transaction was still open included: migration 00063's
// Down waits for it. Summed while the bump was open, row 1 would lack it,
// and the count would go down.
func TestLateWritesMigrateDownRacesBump_RG1(t *testing.T) {
	s, _ := postgresStore(t)
	ctx := t.Context()
	release, err := s.HoldLateCount(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	down := make(chan error, 1)
	go func() { down <- s.MigrateDownTo(context.WithoutCancel(ctx), 62) }()
	waitForLockWaiter(t, s, "the migration down, for the open bump")
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := <-down; err != nil {
		t.Fatal(err)
	}
	if n, err := s.QueryInt(ctx, `SELECT writes FROM outage_placement_writes WHERE id = 1`); err != nil || n != 1 {
		t.Errorf("row 1 after migrating down: %d, %v; want 1 (the bump open meanwhile)", n, err)
	}
}

// R-G1 (PostgreSQL): migration 00063's Down locks row 1 before the table,
// as a fold (foldLateWrites) does, so a replica's open folding meanwhile
// waits or is waited for, never both: here the fold holds row 1 as the
// Down starts, then deletes; the other way round each would wait for the
// other, a deadlock that failed one of them.
func TestLateWritesMigrateDownRacesFold_RG1(t *testing.T) {
	s, dsn := postgresStore(t)
	ctx := t.Context()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	fold, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fold.Rollback() })
	if _, err := fold.ExecContext(ctx, `SELECT writes FROM outage_placement_writes WHERE id = 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	down := make(chan error, 1)
	go func() { down <- s.MigrateDownTo(context.WithoutCancel(ctx), 62) }()
	waitForLockWaiter(t, s, "the migration down, for row 1")
	if _, err := fold.ExecContext(ctx, `DELETE FROM late_session_writes WHERE bumped < 0`); err != nil {
		t.Errorf("the fold's DELETE while the migration down waits: %v", err)
	}
	if err := fold.Commit(); err != nil {
		t.Errorf("the fold's commit: %v", err)
	}
	if err := <-down; err != nil {
		t.Errorf("the migration down: %v", err)
	}
}
