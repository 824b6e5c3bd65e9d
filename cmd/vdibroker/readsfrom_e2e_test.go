//go:build unix

package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/federation"
	"github.com/vdibroker/vdibroker/store"
)

// TestServeWaitsForReadsFrom_RG5: serve's pod on SQLite waits, before its
// server answers, for its reads' start: the second after the one it took
// its data dir in, or the second after the read mark the process before
// left when that is later (a crash, or this clock behind that one's); its
// server refuses the reads signed before it, and a graceful Close leaves
// the mark at the latest read taken (the server refuses pod-to-pod calls
// from then on, federation.Verifier.Close), not the one its ticks had
// moved ahead. The wait is recorded, not slept, and the server's clock
// frozen before Open: reads signed in the second before the start would
// be taken if the server were not given it (vhttp.Config.ReadsFrom).
func TestServeWaitsForReadsFrom_RG5(t *testing.T) {
	dir := t.TempDir()
	secret := []byte("reads-from-federation-secret-0123456789")
	secretFile := filepath.Join(dir, "federation.secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	open := func(t *testing.T, now time.Time) (*Main, []time.Time) {
		t.Helper()
		var waited []time.Time
		m := &Main{Listen: "127.0.0.1:0", DataDir: data, ServerNow: func() time.Time { return now },
			Federation: FederationFlags{PodName: "pod1", SecretFile: secretFile, PodTimeout: time.Second},
			waitReads:  func(until time.Time, _ *slog.Logger) { waited = append(waited, until) }}
		if err := m.Open(t.Context()); err != nil {
			t.Fatal(err)
		}
		return m, waited
	}
	read := func(t *testing.T, m *Main, signed time.Time) int {
		t.Helper()
		return getLoads(t, m.URL(), federation.Sign(secret, "GET", federation.LoadsPath, "pod2", nil, signed))
	}
	mark := func(t *testing.T) time.Time {
		t.Helper()
		db, err := store.Open(t.Context(), "", data, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		from, err := federation.ReadsFrom(t.Context(), db, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return from
	}

	t.Run("first start", func(t *testing.T) {
		before := time.Now()
		m, waited := open(t, before)
		defer m.Close()
		// readsFrom(locked), locked at or after before.
		if len(waited) != 1 || waited[0].Before(before.Truncate(time.Second).Add(time.Second)) || !waited[0].Equal(waited[0].Truncate(time.Second)) {
			t.Fatalf("waited for %v, want once, for a whole second after %s", waited, before)
		}
		from := waited[0]
		if got := read(t, m, from.Add(-time.Second)); got != http.StatusUnauthorized {
			t.Errorf("a read signed the second before the start: %d, want 401", got)
		}
		if got := read(t, m, from); got != http.StatusOK {
			t.Fatalf("a read signed at the start: %d, want 200", got)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		// The read was verified at before (the server's clock): the mark
		// is the second before the start, its ticks' (before + 10 s)
		// lowered by Close.
		if got := mark(t); !got.Equal(from) {
			t.Errorf("after a graceful Close the next reads start at %s, want %s (the start kept)", got, from)
		}
	})

	t.Run("after a mark ahead", func(t *testing.T) {
		// The process before moved its mark ahead on a clock 20 s ahead
		// of this one, then crashed: mark at +20 + 2 × 5 s.
		db, err := store.Open(t.Context(), "", data, nil)
		if err != nil {
			t.Fatal(err)
		}
		ahead := time.Now().Add(20 * time.Second)
		v := &federation.Verifier{Secrets: federation.NewSecrets(secret), ReadsInMemory: true, Marks: db, MarkInterval: 5 * time.Second,
			Now: func() time.Time { return ahead }}
		err = v.Mark(context.Background())
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := ahead.Add(10 * time.Second).Truncate(time.Second).Add(time.Second)
		m, waited := open(t, time.Now())
		defer m.Close()
		if len(waited) != 1 || !waited[0].Equal(want) {
			t.Fatalf("waited for %v, want once, for %s (the second after the mark)", waited, want)
		}
		if got := read(t, m, want.Add(-time.Second)); got != http.StatusUnauthorized {
			t.Errorf("a read signed the second before the mark's: %d, want 401", got)
		}
		if got := read(t, m, want); got != http.StatusOK {
			t.Errorf("a read signed at the start: %d, want 200", got)
		}
	})
}

// TestServeFailedOpenLeavesNoMarkAhead_RG5: an Open that fails once its
// server moves the read mark (here its port is in use) lowers the mark
// its ticks set 2 × 5 s ahead to its reads' start, as Close does: the
// next start, once the port is free, waits for its own second only, not
// for a mark it would take for a crash's.
func TestServeFailedOpenLeavesNoMarkAhead_RG5(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "federation.secret")
	if err := os.WriteFile(secretFile, []byte("reads-from-federation-secret-0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	data := filepath.Join(dir, "data")
	now := time.Now()
	var waited []time.Time
	m := &Main{Listen: busy.Addr().String(), DataDir: data, ServerNow: func() time.Time { return now },
		Federation: FederationFlags{PodName: "pod1", SecretFile: secretFile, PodTimeout: time.Second},
		waitReads:  func(until time.Time, _ *slog.Logger) { waited = append(waited, until) }}
	if err := m.Open(t.Context()); err == nil {
		m.Close()
		t.Fatal("Open on a port in use: no error")
	}
	if len(waited) != 1 {
		t.Fatalf("waited for %v, want once", waited)
	}
	db, err := store.Open(t.Context(), "", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	from, err := federation.ReadsFrom(t.Context(), db, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if !from.Equal(waited[0]) {
		t.Errorf("after a failed Open the next reads start at %s, want %s (its reads' start; not its ticks' mark, %s ahead)", from, waited[0], from.Sub(waited[0]))
	}
}
