package federation

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// sqliteNonces is Nonces over a real SQLite store's UseNonces, as
// global.Service records a call's nonce (one use, committed at the
// injected clock's time); calls counts the calls that reached it.
type sqliteNonces struct {
	db    *store.DB
	now   func() time.Time
	calls *int
}

func (s sqliteNonces) UseNonce(ctx context.Context, pod, nonce string, expires time.Time) (bool, error) {
	*s.calls++
	refused, err := s.db.UseNonces(ctx, []vdibroker.NonceUse{{Pod: pod, Nonce: nonce}}, expires, s.now())
	switch {
	case err != nil:
		return false, err
	case refused[0] == nil:
		return true, nil
	case vdibroker.ErrorCode(refused[0]) == vdibroker.EUnauthenticated:
		return false, nil // a replay
	default:
		return false, refused[0]
	}
}

// openSQLiteNonces opens a SQLite store in a temp dir, on clock.
func openSQLiteNonces(t *testing.T, clock func() time.Time) sqliteNonces {
	t.Helper()
	db, err := store.OpenWith(t.Context(), "", t.TempDir(), nil, store.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return sqliteNonces{db: db, now: clock, calls: new(int)}
}

// TestReadReplayedAfterARestart_RG5 (R-SEC): a read whose nonce a SQLite
// pod keeps in memory (ReadsInMemory), verified before the pod's process
// restarts, is refused when replayed to the new process (a Verifier with
// a later Started, on the same store) within its window. The process
// before was up an hour; the read is verified at v, the process
// restarts at started and the replay comes at replay (offsets from t0).
// Before the fix each but the control was taken: its time was not before
// Started, and its nonce was in the lost memory only.
func TestReadReplayedAfterARestart_RG5(t *testing.T) {
	secret := []byte("0123456789abcdef-federation")
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	for _, tc := range []struct {
		name                       string
		signed, v, started, replay time.Duration
		refusedBy                  string // the replay's refusal: "time" or "nonce"
	}{
		// Signed a minute ahead of the pod's clock, restarted a second
		// later: ts = t0+60 is after Started (t0+1), within the window
		// at t0+2. The process before recorded it in the store too.
		{"signed a minute ahead, restarted a second later", 60 * time.Second, 0, time.Second, 2 * time.Second, "nonce"},
		// The latest restart it is still within the window of: t0+59.9
		// (Started's second t0+59, ts t0+60 within a MaxSkew and a
		// second of it, so sent to the store).
		{"signed a minute ahead, restarted 59.9 s later", 60 * time.Second, 0, 59900 * ms, 59950 * ms, "nonce"},
		// Signed a second ahead, verified at t0+0.5 and restarted at
		// t0+0.9: its second (t0+1) after Started's (t0).
		{"signed a second ahead, restarted in the same second", time.Second, 500 * ms, 900 * ms, 1500 * ms, "nonce"},
		// Control, refused before the fix too: signed at its
		// verification, a second before the restart.
		{"signed a second before the restart", 0, 0, time.Second, 1500 * ms, "time"},
		// Signed at t0 and verified at t0+0.2, the process stopping and
		// the next taking the data dir at t0+0.6: serve starts its
		// server at the next whole second (cmd/vdibroker readsFrom), so
		// the read is refused by its time.
		{"signed and taken in the second of the restart", 0, 200 * ms, time.Second, 1200 * ms, "time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := t0.Add(tc.v)
			clock := func() time.Time { return now }
			st := openSQLiteNonces(t, clock)
			before := &Verifier{Secrets: NewSecrets(secret), Now: clock, Nonces: st, ReadsInMemory: true, Started: t0.Add(-time.Hour)}
			read := func(v *Verifier, h map[string]string) error {
				_, err := v.VerifyRead(t.Context(), func(k string) string { return h[k] }, "GET", LoadsPath, nil)
				return err
			}
			captured := Sign(secret, "GET", LoadsPath, "ams1", nil, t0.Add(tc.signed))
			if err := read(before, captured); err != nil {
				t.Fatalf("the read at t0+%s, before the restart: %v", tc.v, err)
			}

			now = t0.Add(tc.started)
			after := &Verifier{Secrets: NewSecrets(secret), Now: clock, Nonces: st, ReadsInMemory: true, Started: now}
			now = t0.Add(tc.replay)
			err := read(after, captured)
			if vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
				t.Fatalf("replayed at t0+%s after a restart at t0+%s: %v, want Unauthenticated", tc.replay, tc.started, err)
			}
			want := "before this pod started"
			if tc.refusedBy == "nonce" {
				want = vdibroker.ErrorMessage(vdibroker.ErrReplayed())
			}
			if got := vdibroker.ErrorMessage(err); !strings.Contains(got, want) {
				t.Errorf("the replay refused for %q, want it refused by its %s (%q)", got, tc.refusedBy, want)
			}

			// The new process takes reads signed after it started.
			now = t0.Add(tc.started).Truncate(time.Second).Add(time.Second)
			if err := read(after, Sign(secret, "GET", LoadsPath, "ams1", nil, now)); err != nil {
				t.Errorf("a new read at t0+%s, after the restart: %v", now.Sub(t0), err)
			}
		})
	}
}

// TestReadNonceKeptInStoreOnlyWhenItMustBe_RG5: a read a SQLite pod keeps
// in memory reaches the store (a synced commit) only when signed ahead of
// the pod's clock or within a minute and a second of its start; a pod up
// for longer taking a read signed at or behind its clock does not touch
// the store. A read recorded in both is kept in memory too: replayed once
// its time is no longer ahead, when it would be kept in memory only, it
// is refused.
func TestReadNonceKeptInStoreOnlyWhenItMustBe_RG5(t *testing.T) {
	secret := []byte("0123456789abcdef-federation")
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		up        time.Duration // since Started, at t0
		signed    time.Duration // from t0
		wantCalls int
	}{
		{"up an hour, signed now", time.Hour, 0, 0},
		{"up an hour, signed a minute behind", time.Hour, -MaxSkew, 0},
		{"up an hour, signed 999 ms behind", time.Hour, -999 * time.Millisecond, 0},
		{"up an hour, signed a second ahead", time.Hour, time.Second, 1},
		{"up an hour, signed a minute ahead", time.Hour, MaxSkew, 1},
		// Started at t0-30: t0 is within 61 s of Started's second.
		{"up 30 s, signed now", 30 * time.Second, 0, 1},
		// Started at t0-61: t0 is Started's second + 61, the last sent.
		{"up 61 s, signed now", 61 * time.Second, 0, 1},
		{"up 62 s, signed now", 62 * time.Second, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := t0
			clock := func() time.Time { return now }
			st := openSQLiteNonces(t, clock)
			v := &Verifier{Secrets: NewSecrets(secret), Now: clock, Nonces: st, ReadsInMemory: true, Started: t0.Add(-tc.up)}
			h := Sign(secret, "GET", LoadsPath, "ams1", nil, t0.Add(tc.signed))
			read := func() error {
				_, err := v.VerifyRead(t.Context(), func(k string) string { return h[k] }, "GET", LoadsPath, nil)
				return err
			}
			if err := read(); err != nil {
				t.Fatalf("the read: %v", err)
			}
			if *st.calls != tc.wantCalls {
				t.Errorf("the read called the store %d times, want %d", *st.calls, tc.wantCalls)
			}
			// Replayed when its time is behind the clock (within the
			// window): refused, from memory.
			now = t0.Add(tc.signed).Add(MaxSkew)
			if err := read(); vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
				t.Errorf("replayed at t0+%s: %v, want Unauthenticated", now.Sub(t0), err)
			}
			if *st.calls != tc.wantCalls {
				t.Errorf("the replay called the store (%d calls in all, want %d): memory refuses it", *st.calls, tc.wantCalls)
			}
		})
	}
}
