package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

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

		c0 := s.WriterCommits()
		if _, err := s.PruneHistory(ctx, cut); err != nil {
			t.Fatal(err)
		}
		c1 := s.WriterCommits()
		if _, err := s.PruneHistory(ctx, cut); err != nil {
			t.Fatal(err)
		}
		c2 := s.WriterCommits()
		// 10 rows in batches of 3: 4 writes, where a table with nothing
		// to prune takes 1.
		if got, want := (c1-c0)-(c2-c1), int64(3); got != want {
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
