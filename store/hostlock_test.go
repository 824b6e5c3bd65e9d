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

// TestLogoffsAskedAtOnceQueueOne (R-S4, R-SEC; PostgreSQL): a logoff asked
// on one replica while another's for the same session is being queued
// waits for it, under the host's lock, and is answered with it: read
// before the other committed (READ COMMITTED), the queued one was not
// there yet, and each wrote a row of its own.
func TestLogoffsAskedAtOnceQueueOne(t *testing.T) {
	s, dsn := postgresStore(t)
	ctx := t.Context()
	mustPool(t, s, pool("p", vdibroker.Pooled))
	mustHost(t, s, "p", "h1")
	id := mustCommit(t, s, placement("p", "h1", "alice", 10))
	other := holdHostLock(t, dsn, "p", "h1") // the other replica's QueueCommand
	if _, err := other.ExecContext(ctx, `INSERT INTO commands (id, host_pool, session_host, type, session_id, agent_session_id, user_name,
		message, state, result, create_time) VALUES ('first', 'p', 'h1', $1, $2, '', 'alice', '', $3, '', $4)`,
		vdibroker.CommandLogoff, id, vdibroker.CommandQueued, t0.UnixNano()); err != nil {
		t.Fatal(err)
	}
	c := &vdibroker.Command{HostPool: "p", SessionHost: "h1", Type: vdibroker.CommandLogoff, SessionID: id, CreateTime: t0}
	queued := make(chan error, 1)
	go func() { queued <- s.QueueCommand(ctx, c) }()
	waitForLockWaiter(t, s, "the second logoff, for the host")
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-queued; err != nil {
		t.Fatal(err)
	}
	if c.ID != "first" {
		t.Errorf("the second logoff was queued as %s, want the first's answer", c.ID)
	}
	if n, err := s.QueryInt(ctx, `SELECT count(*) FROM commands`); err != nil || n != 1 {
		t.Errorf("%d commands, %v; want 1", n, err)
	}
}
