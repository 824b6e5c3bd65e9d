package store_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// An admin's change that waited for the host's lock behind another
// replica's change of the same host sees that change: the read under the
// lock is not the row as it was before the wait (PostgreSQL, READ
// COMMITTED), so the drain does not write the old address back.
func TestUpdateSessionHostAfterWaitSeesTheOtherChange(t *testing.T) {
	s, dsn := postgresStore(t)
	ctx := t.Context()
	mustPool(t, s, pool("p", vdibroker.Pooled))
	mustHost(t, s, "p", "h1")
	// The other replica's change: the host's lock, then a new address.
	tx := holdHostLock(t, dsn, "p", "h1")
	if _, err := tx.ExecContext(ctx, `UPDATE session_hosts SET address = 'moved.example:3389' WHERE host_pool = 'p' AND name = 'h1'`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var seen string
	go func() {
		_, err := s.UpdateSessionHost(context.WithoutCancel(ctx), "p", "h1", func(h *vdibroker.SessionHost) error {
			seen = h.Address
			h.AllowNewSession = false
			return nil
		})
		done <- err
	}()
	waitForLockWaiter(t, s, "the update")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h, err := s.GetSessionHost(ctx, "p", "h1")
	if err != nil {
		t.Fatal(err)
	}
	if seen != "moved.example:3389" || h.Address != "moved.example:3389" || h.AllowNewSession {
		t.Fatalf("the update saw address %q; stored %q, allowNewSession %v; want the other change kept and the drain applied",
			seen, h.Address, h.AllowNewSession)
	}
}

// holdHostLock begins another connection's transaction (another replica's
// write) on the schema of dsn and takes the host's lock, its counts row,
// as every writer of the host does first; the transaction is rolled back
// when the test ends unless the test commits it.
func holdHostLock(t *testing.T, dsn, pool, host string) *sql.Tx {
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
	if _, err := tx.ExecContext(t.Context(), `SELECT name FROM host_counts WHERE host_pool = $1 AND name = $2 FOR UPDATE`, pool, host); err != nil {
		t.Fatal(err)
	}
	return tx
}
