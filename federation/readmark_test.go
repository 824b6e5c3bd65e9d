package federation

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// countingMarks is Marks over a real store, counting the marks committed.
type countingMarks struct {
	Marks
	sets *int
}

func (m countingMarks) SetSharedValue(ctx context.Context, name, value string, now time.Time) error {
	*m.sets++
	return m.Marks.SetSharedValue(ctx, name, value, now)
}

// TestReadReplayedAfterARestartOnAClockBehind_RG5 (R-SEC): a read a SQLite
// pod kept in memory only (signed at its verification, the pod up over a
// minute) is refused when replayed to the next process on the same store
// whose clock is 5 s behind (an NTP step, the data dir moved to another
// machine), after a graceful stop and after a crash alike. Offsets from
// t0: the read is signed and verified at 100, the next process starts at
// 96 by its clock (its own window from 97, readsFrom) and the replay comes
// at 97. Without the read mark it was taken: signed at 100, not before
// 97, ahead of the clock so sent to the store, which never saw it.
func TestReadReplayedAfterARestartOnAClockBehind_RG5(t *testing.T) {
	secret := []byte("0123456789abcdef-federation")
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	for _, tc := range []struct {
		name string
		// lastMark: when the process before last moved its mark ahead
		// (KeepMark's tick, 2 × 5 s ahead); graceful: it closed (Close)
		// at 100.5, else it crashed after the read.
		lastMark float64
		graceful bool
		// wantFrom: the new process's reads start, worked out: the
		// graceful close marks 100 (the read's verification), the second after
		// is 101; a crash leaves 98 + 10 = 108, the second after 109.
		wantFrom float64
	}{
		{"stopped gracefully", 98, true, 101},
		{"crashed between marks", 98, false, 109},
		{"crashed with the mark just moved", 99.9, false, 110},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := at(tc.lastMark)
			clock := func() time.Time { return now }
			st := openSQLiteNonces(t, clock)
			read := func(v *Verifier, h map[string]string) error {
				_, err := v.VerifyRead(t.Context(), func(k string) string { return h[k] }, "GET", LoadsPath, nil)
				return err
			}
			before := &Verifier{Secrets: NewSecrets(secret), Now: clock, Nonces: st, ReadsInMemory: true, Started: t0.Add(-time.Hour),
				Marks: st.db, MarkInterval: 5 * time.Second}
			if err := before.Mark(t.Context()); err != nil {
				t.Fatal(err)
			}
			now = at(100)
			captured := Sign(secret, "GET", LoadsPath, "ams1", nil, now)
			if err := read(before, captured); err != nil {
				t.Fatalf("the read before the restart: %v", err)
			}
			if *st.calls != 0 {
				t.Fatalf("the read reached the store (%d calls): kept in memory only, the case this test is about", *st.calls)
			}
			if tc.graceful {
				now = at(100.5)
				if err := before.Close(t.Context()); err != nil {
					t.Fatal(err)
				}
			}

			// The next process, on a clock 5 s behind.
			now = at(96)
			from, err := ReadsFrom(t.Context(), st.db, now.Truncate(time.Second).Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if !from.Equal(at(tc.wantFrom)) {
				t.Errorf("ReadsFrom = t0+%s, want t0+%vs", from.Sub(t0), tc.wantFrom)
			}
			after := &Verifier{Secrets: NewSecrets(secret), Now: clock, Nonces: st, ReadsInMemory: true, Started: from,
				Marks: st.db, MarkInterval: 5 * time.Second}
			now = at(97)
			err = read(after, captured)
			if vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated || !strings.Contains(vdibroker.ErrorMessage(err), "before this pod started") {
				t.Fatalf("the read replayed after the restart: %v, want refused by its time", err)
			}
			// The new process takes a read signed once its window started.
			now = from
			if err := read(after, Sign(secret, "GET", LoadsPath, "ams1", nil, now)); err != nil {
				t.Errorf("a new read at t0+%s: %v", now.Sub(t0), err)
			}
		})
	}
}

// TestReadMarkCostsNoCommitPerRead_RG5: with its mark moved ahead every
// interval (KeepMark), a pod up over a minute with clocks in step commits
// nothing for a read, neither a nonce nor a mark; a read past the mark (a
// tick late) commits the mark first, once, and the mark is never below a
// read verified, even when the clock steps back within the process.
func TestReadMarkCostsNoCommitPerRead_RG5(t *testing.T) {
	secret := []byte("0123456789abcdef-federation")
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	clock := func() time.Time { return now }
	st := openSQLiteNonces(t, clock)
	sets := new(int)
	v := &Verifier{Secrets: NewSecrets(secret), Now: clock, Nonces: st, ReadsInMemory: true, Started: t0.Add(-time.Hour),
		Marks: countingMarks{Marks: st.db, sets: sets}, MarkInterval: 5 * time.Second}
	read := func() error {
		h := Sign(secret, "GET", LoadsPath, "ams1", nil, now)
		_, err := v.VerifyRead(t.Context(), func(k string) string { return h[k] }, "GET", LoadsPath, nil)
		return err
	}
	if err := v.Mark(t.Context()); err != nil { // the tick at t0: marked t0+10
		t.Fatal(err)
	}
	for i := range 100 { // reads from t0 to t0+9.9
		now = t0.Add(time.Duration(i) * 99 * time.Millisecond)
		if err := read(); err != nil {
			t.Fatalf("read at t0+%s: %v", now.Sub(t0), err)
		}
	}
	if *st.calls != 0 || *sets != 1 {
		t.Errorf("100 reads within the mark: %d nonce commits and %d marks, want 0 and the tick's 1", *st.calls, *sets)
	}
	now = t0.Add(10 * time.Second) // the tick is late: the read moves the mark
	if err := read(); err != nil {
		t.Fatal(err)
	}
	if err := read(); err != nil {
		t.Fatal(err)
	}
	if *sets != 2 {
		t.Errorf("two reads past the mark committed %d marks in all, want 2 (the tick's, one for the first)", *sets)
	}
	// The clock steps back 30 s: the next tick commits no mark below the
	// read just verified at t0+10, so the next process starts after it.
	now = t0.Add(-20 * time.Second)
	if err := v.Mark(t.Context()); err != nil {
		t.Fatal(err)
	}
	from, err := ReadsFrom(t.Context(), st.db, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(11 * time.Second); !from.Equal(want) {
		t.Errorf("after a tick on a clock stepped back: ReadsFrom = t0+%s, want t0+%s (the second after the read at t0+10)", from.Sub(t0), want.Sub(t0))
	}
}

// TestReadsFromNoMark_RG5: with no mark in the store (the first process on
// it) the window starts when the caller says; a mark behind it leaves it
// there.
func TestReadsFromNoMark_RG5(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	st := openSQLiteNonces(t, func() time.Time { return t0 })
	if from, err := ReadsFrom(t.Context(), st.db, t0); err != nil || !from.Equal(t0) {
		t.Errorf("no mark: %s %v, want t0", from, err)
	}
	v := &Verifier{Secrets: NewSecrets([]byte("0123456789abcdef-federation")), Now: func() time.Time { return t0.Add(-time.Minute) },
		ReadsInMemory: true, Marks: st.db, Started: t0.Add(-time.Hour)}
	if err := v.Close(t.Context()); err != nil { // marks t0-1h-1ns: no read verified
		t.Fatal(err)
	}
	if from, err := ReadsFrom(t.Context(), st.db, t0); err != nil || !from.Equal(t0) {
		t.Errorf("a mark an hour behind: t0+%s %v, want t0", from.Sub(t0), err)
	}
}

// TestClosedVerifierRefusesEveryCall_RG5: once closed (after the server's
// shutdown), a verifier verifies nothing, of any kind, signed well or
// not: the process may let go of its store next. Its moves of the mark
// are refused too, so none comes after the mark Close commits.
func TestClosedVerifierRefusesEveryCall_RG5(t *testing.T) {
	secret := []byte("0123456789abcdef-federation")
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return t0 }
	st := openSQLiteNonces(t, clock)
	v := &Verifier{Secrets: NewSecrets(secret), Now: clock, Nonces: st, ReadsInMemory: true, Started: t0.Add(-time.Hour), Marks: st.db}
	h := Sign(secret, "POST", ConnectPath, "ams1", nil, t0)
	get := func(k string) string { return h[k] }
	if _, err := v.VerifyRead(t.Context(), get, "POST", ConnectPath, nil); err != nil {
		t.Fatalf("before Close: %v", err)
	}
	// A call checked before Close, finished after: refused at Finish.
	h = Sign(secret, "POST", ConnectPath, "ams1", nil, t0)
	inFlight, err := v.Check(get, KindRead)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Finish(t.Context(), inFlight, "POST", ConnectPath, nil); vdibroker.ErrorCode(err) != vdibroker.EPodUnavailable {
		t.Errorf("a read checked before Close, finished after: %v, want PodUnavailable", err)
	}
	for _, kind := range []Kind{KindRead, KindRecord, KindHeld} {
		h = Sign(secret, "POST", ConnectPath, "ams1", nil, t0)
		if _, _, err := v.verify(t.Context(), get, "POST", ConnectPath, nil, kind); vdibroker.ErrorCode(err) != vdibroker.EPodUnavailable {
			t.Errorf("kind %d after Close: %v, want PodUnavailable", kind, err)
		}
	}
	if err := v.Mark(t.Context()); vdibroker.ErrorCode(err) != vdibroker.EPodUnavailable {
		t.Errorf("Mark after Close: %v, want PodUnavailable", err)
	}
	if *st.calls != 0 {
		t.Errorf("%d calls reached the store after Close", *st.calls)
	}
}

// failingMarks is a store whose writes fail while down (a read-only or
// full disk, R-OUT1); its reads and the writes once up go to Marks.
type failingMarks struct {
	Marks
	down *bool
	sets *int
}

func (m failingMarks) SetSharedValue(ctx context.Context, name, value string, now time.Time) error {
	*m.sets++
	if *m.down {
		return vdibroker.Errorf(vdibroker.EStoreUnavailable, "attempt to write a readonly database")
	}
	return m.Marks.SetSharedValue(ctx, name, value, now)
}

// TestReadMarkInAStoreOutage_RG5 (R-OUT1): when the read mark cannot be
// committed, a pod still takes its peers' reads (their session look-ups,
// their loads) rather than cutting itself off for the whole outage, and
// tries the commit at most once a MarkInterval, not at every read. Once
// the store takes writes again, the first mark is above every read taken
// during the outage, so the next process starts after them.
func TestReadMarkInAStoreOutage_RG5(t *testing.T) {
	secret := []byte("0123456789abcdef-federation")
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	clock := func() time.Time { return now }
	st := openSQLiteNonces(t, clock)
	down, sets := false, new(int)
	v := &Verifier{Secrets: NewSecrets(secret), Now: clock, Nonces: st, ReadsInMemory: true, Started: t0.Add(-time.Hour),
		Marks: failingMarks{Marks: st.db, down: &down, sets: sets}, MarkInterval: 5 * time.Second}
	read := func() error {
		h := Sign(secret, "GET", LoadsPath, "ams1", nil, now)
		_, err := v.VerifyRead(t.Context(), func(k string) string { return h[k] }, "GET", LoadsPath, nil)
		return err
	}
	if err := v.Mark(t.Context()); err != nil { // marked t0+10
		t.Fatal(err)
	}
	down = true
	// Reads from t0+10 (past the mark) to t0+19.5, every half second.
	for i := range 20 {
		now = t0.Add(10*time.Second + time.Duration(i)*500*time.Millisecond)
		if err := read(); err != nil {
			t.Fatalf("read at t0+%s in the outage: %v, want it taken", now.Sub(t0), err)
		}
	}
	// The tick's, then one try at t0+10 and one at t0+15: not one a read.
	if *sets != 3 {
		t.Errorf("20 reads past the mark in an outage tried %d commits in all, want 3 (the tick's, then one each 5 s)", *sets)
	}
	down = false
	now = t0.Add(20 * time.Second)
	if err := v.Mark(t.Context()); err != nil {
		t.Fatal(err)
	}
	from, err := ReadsFrom(t.Context(), st.db, t0)
	if err != nil {
		t.Fatal(err)
	}
	if last := t0.Add(19500 * time.Millisecond); !from.After(last) {
		t.Errorf("after the outage: ReadsFrom = t0+%s, want after the last read taken in it (t0+%s)", from.Sub(t0), last.Sub(t0))
	}
	if err := read(); err != nil {
		t.Fatalf("read after the outage: %v", err)
	}
}

// TestReadMarkOneMoveForTheReadsPastIt_RG5 (R-OUT1): reads that found the
// mark behind them wait in turn for markMu; each that gets it after a
// move went through, or after one failed less than a MarkInterval ago,
// commits nothing, so that many reads arriving together past the mark
// cost one commit, and in an outage one failed try a MarkInterval, not
// one each in a row (each a synced commit, or a store's timeout). Here
// each mark(ctx, t) stands for a read verified at t that found the mark
// behind it before the move before it ended.
func TestReadMarkOneMoveForTheReadsPastIt_RG5(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	clock := func() time.Time { return now }
	st := openSQLiteNonces(t, clock)
	down, sets := false, new(int)
	v := &Verifier{Secrets: NewSecrets([]byte("0123456789abcdef-federation")), Now: clock, Nonces: st, ReadsInMemory: true,
		Started: t0.Add(-time.Hour), Marks: failingMarks{Marks: st.db, down: &down, sets: sets}, MarkInterval: 5 * time.Second}
	if err := v.Mark(t.Context()); err != nil { // marked t0+10
		t.Fatal(err)
	}
	// Two reads at t0+10 found the mark behind; the first moves it to
	// t0+20, the second, then, commits nothing.
	now = t0.Add(10 * time.Second)
	for i := range 2 {
		if err := v.mark(t.Context(), now); err != nil {
			t.Fatalf("move %d: %v", i, err)
		}
	}
	if *sets != 2 {
		t.Errorf("two reads past the mark: %d commits in all, want 2 (the tick's, the first read's)", *sets)
	}
	// In an outage: the first read's try fails, the others wait for it
	// and try nothing; the reads are taken (admit).
	down = true
	now = t0.Add(20 * time.Second)
	if err := v.mark(t.Context(), now); err == nil {
		t.Fatal("the move in the outage went through")
	}
	for range 2 {
		if err := v.mark(t.Context(), now); err != nil {
			t.Fatalf("a move after the failed one: %v, want none tried", err)
		}
	}
	if *sets != 3 {
		t.Errorf("three reads past the mark in an outage: %d commits tried in all, want 3 (one for the three)", *sets)
	}
}

// TestReadMarkCallerGone_RG5 (R-SEC): a read past the mark whose caller
// left while the mark's commit was under way (its ctx done) is refused,
// and lets no read after it past the mark without a commit: only the
// store's failure does (TestReadMarkInAStoreOutage_RG5), a caller's
// hanging up is not an outage.
func TestReadMarkCallerGone_RG5(t *testing.T) {
	secret := []byte("0123456789abcdef-federation")
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	clock := func() time.Time { return now }
	st := openSQLiteNonces(t, clock)
	sets := new(int)
	v := &Verifier{Secrets: NewSecrets(secret), Now: clock, Nonces: st, ReadsInMemory: true, Started: t0.Add(-time.Hour),
		Marks: countingMarks{Marks: st.db, sets: sets}, MarkInterval: 5 * time.Second}
	read := func(ctx context.Context) error {
		h := Sign(secret, "GET", LoadsPath, "ams1", nil, now)
		_, err := v.VerifyRead(ctx, func(k string) string { return h[k] }, "GET", LoadsPath, nil)
		return err
	}
	if err := v.Mark(t.Context()); err != nil { // marked t0+10
		t.Fatal(err)
	}
	now = t0.Add(10 * time.Second)
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	if err := read(gone); err == nil {
		t.Errorf("a read past the mark whose caller left: taken, want refused (no mark committed)")
	}
	now = t0.Add(10500 * time.Millisecond)
	if err := read(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The tick's, the gone read's try, the next read's commit.
	if *sets != 3 {
		t.Errorf("the read after the one whose caller left: %d commits tried in all, want 3 (it commits the mark)", *sets)
	}
	from, err := ReadsFrom(t.Context(), st.db, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !from.After(now) {
		t.Errorf("ReadsFrom = t0+%s, want after the read taken at t0+%s", from.Sub(t0), now.Sub(t0))
	}
}
