package store_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// extraPruneWrites prunes s's history before cut twice and answers how
// many writes the first took more than the second, which finds nothing:
// the writes of the chunks past one a table.
func extraPruneWrites(t *testing.T, s *store.DB, cut time.Time) int64 {
	t.Helper()
	c0 := s.WriterCommits()
	if _, err := s.PruneHistory(t.Context(), cut); err != nil {
		t.Fatal(err)
	}
	c1 := s.WriterCommits()
	if _, err := s.PruneHistory(t.Context(), cut); err != nil {
		t.Fatal(err)
	}
	return (c1 - c0) - (s.WriterCommits() - c1)
}

// TestPruneRevokedTokensInChunks: PruneHistory deletes revoked tokens'
// hashes past the retention in writes of at most pruneBatch rows (R-SEC:
// one DELETE of a long history held SQLite's only writer, and every
// connect behind it, for as long as it ran), all of them, and keeps the
// newer ones. Here the batch is 3 and 10 hashes are past: writes of 3, 3,
// 3 and 1, so the prune commits 3 writes more than a second prune that
// finds nothing (one write a table).
func TestPruneRevokedTokensInChunks(t *testing.T) {
	defer store.SetPruneBatch(3)()
	run(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		now := t0
		s := tg.open(t, store.Options{Now: func() time.Time { return now }})
		revoke := func(name string, at time.Time) {
			t.Helper()
			tk := &vdibroker.Token{ID: name, Role: vdibroker.RoleReader, Subject: name, Hash: "h-" + name, CreateTime: t0}
			if err := s.CreateToken(ctx, tk); err != nil {
				t.Fatal(err)
			}
			now = at
			if err := s.DeleteToken(ctx, name); err != nil {
				t.Fatal(err)
			}
		}
		const past, kept = 10, 4
		for i := range past {
			revoke(fmt.Sprintf("old%02d", i), t0.Add(time.Duration(i)*time.Minute))
		}
		cut := t0.Add(time.Hour)
		revoke("at-cut", cut) // not before the cut: kept
		for i := range kept - 1 {
			revoke(fmt.Sprintf("new%02d", i), cut.Add(time.Duration(i+1)*time.Minute))
		}

		extra := extraPruneWrites(t, s, cut)
		// 10 rows in batches of 3: 4 writes, where a table with nothing
		// to prune takes 1.
		if got, want := extra, int64(3); got != want {
			t.Errorf("the prune of 10 revoked hashes took %d writes more than an empty prune, want %d (batches of 3: 3, 3, 3, 1)", got, want)
		}
		left, err := s.QueryInt(ctx, `SELECT count(*) FROM revoked_tokens`)
		if err != nil || left != kept {
			t.Errorf("revoked hashes left: %d, %v; want the %d not before the cut", left, err, kept)
		}
		for i := range past {
			if _, err := s.TokenByHash(ctx, fmt.Sprintf("h-old%02d", i)); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
				t.Errorf("old%02d after the prune: %v, want unknown", i, err)
			}
		}
		for _, name := range []string{"at-cut", "new00", "new01", "new02"} {
			if tk, err := s.TokenByHash(ctx, "h-"+name); err != nil || tk.RevokeTime == nil {
				t.Errorf("%s after the prune: %+v, %v; want it revoked still", name, tk, err)
			}
		}
	})
}

// TestPruneExpiredTokensInChunks: PruneHistory deletes API tokens expired
// before the cut in writes of at most pruneBatch rows, as it does revoked
// hashes (one DELETE of every expired token held SQLite's only writer for
// as long as it ran), all of them, and keeps the unexpired ones and those
// that never expire. Here the batch is 3 and 10 tokens expired before the
// cut: writes of 3, 3, 3 and 1, 3 more than a prune that finds nothing.
func TestPruneExpiredTokensInChunks(t *testing.T) {
	defer store.SetPruneBatch(3)()
	run(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		s := tg.open(t, store.Options{})
		create := func(name string, expire *time.Time) {
			t.Helper()
			tk := &vdibroker.Token{ID: name, Role: vdibroker.RoleReader, Subject: name, Hash: "h-" + name, CreateTime: t0, ExpireTime: expire}
			if err := s.CreateToken(ctx, tk); err != nil {
				t.Fatal(err)
			}
		}
		cut := t0.Add(time.Hour)
		const past = 10
		for i := range past {
			at := t0.Add(time.Duration(i) * time.Minute)
			create(fmt.Sprintf("old%02d", i), &at)
		}
		kept := []string{"at-cut", "new00", "new01", "forever0", "forever1"}
		create("at-cut", &cut) // not before the cut: kept
		for i := range 2 {
			at := cut.Add(time.Duration(i+1) * time.Minute)
			create(fmt.Sprintf("new%02d", i), &at)
		}
		create("forever0", nil)
		create("forever1", nil)

		extra := extraPruneWrites(t, s, cut)
		if got, want := extra, int64(3); got != want {
			t.Errorf("the prune of 10 expired tokens took %d writes more than an empty prune, want %d (batches of 3: 3, 3, 3, 1)", got, want)
		}
		left, err := s.QueryInt(ctx, `SELECT count(*) FROM tokens`)
		if err != nil || left != len(kept) {
			t.Errorf("tokens left: %d, %v; want the %d not expired before the cut", left, err, len(kept))
		}
		for i := range past {
			if _, err := s.TokenByHash(ctx, fmt.Sprintf("h-old%02d", i)); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
				t.Errorf("old%02d after the prune: %v, want unknown", i, err)
			}
		}
		for _, name := range kept {
			if _, err := s.TokenByHash(ctx, "h-"+name); err != nil {
				t.Errorf("%s after the prune: %v; want it kept", name, err)
			}
		}
	})
}

// TestPruneExpiredRegistrationTokensInChunks: the same for registration
// tokens; 7 expired before the cut in batches of 3 are writes of 3, 3 and
// 1, 2 more than a prune that finds nothing.
func TestPruneExpiredRegistrationTokensInChunks(t *testing.T) {
	defer store.SetPruneBatch(3)()
	run(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		s := tg.open(t, store.Options{})
		mustPool(t, s, pool("pool1", vdibroker.Pooled))
		create := func(name string, expire time.Time) {
			t.Helper()
			rt := &vdibroker.RegistrationToken{ID: name, HostPool: "pool1", Hash: "rt-" + name, CreateTime: t0, ExpireTime: expire}
			if err := s.CreateRegistrationToken(ctx, rt); err != nil {
				t.Fatal(err)
			}
		}
		cut := t0.Add(time.Hour)
		for i := range 7 {
			create(fmt.Sprintf("old%02d", i), t0.Add(time.Duration(i)*time.Minute))
		}
		create("at-cut", cut) // not before the cut: kept
		create("new00", cut.Add(time.Minute))

		extra := extraPruneWrites(t, s, cut)
		if got, want := extra, int64(2); got != want {
			t.Errorf("the prune of 7 expired registration tokens took %d writes more than an empty prune, want %d (batches of 3: 3, 3, 1)", got, want)
		}
		rts, err := s.ListRegistrationTokens(ctx, "pool1")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, rt := range rts {
			ids = append(ids, rt.ID)
		}
		slices.Sort(ids)
		if got, want := fmt.Sprint(ids), "[at-cut new00]"; got != want {
			t.Errorf("registration tokens left: %s, want %s (those not expired before the cut)", got, want)
		}
	})
}

// TestPruneExpiredTokensUsesTheIndex: each batch of the expired tokens'
// prune finds its rows through the expiry's index (migration 00074), a
// range at its front, not by reading the whole table again for every
// batch (each a write holding SQLite's one writer).
func TestPruneExpiredTokensUsesTheIndex(t *testing.T) {
	run(t, func(t *testing.T, tg target) {
		s := tg.open(t, store.Options{})
		plans, err := s.PruneTokensPlans(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for table, plan := range plans {
			want := "INDEX " + table + "_by_expiry (expire_time<?)"
			if tg.name == "postgres" {
				want = table + "_by_expiry" // an index or a bitmap index scan
			}
			if !strings.Contains(plan, want) {
				t.Errorf("%s: the prune's plan reads more than the expired rows (want %q):\n%s", table, want, plan)
			}
		}
	})
}
