package broker

import (
	"errors"
	"testing"

	"github.com/vdibroker/vdibroker"
)

// staleMark records that a view was marked for a reload.
type staleMark struct{ stale bool }

func (m *staleMark) MarkStale() { m.stale = true }

// TestRetryRule walks connectRound.again through the errors a round can
// end with: which are decided again, and what is refreshed first.
func TestRetryRule(t *testing.T) {
	noCap := vdibroker.Errorf(vdibroker.ENoCapacity, "all hosts are at maxSessionLimit")
	for _, tc := range []struct {
		name       string
		start      connectRound
		err        error
		attempt    int
		wantAgain  bool
		wantLookup bool
		wantStale  bool // the view is marked for a reload
	}{
		// R-C5 after R-C1: refused once from a view that may be stale, so
		// one more round from the store, reading the user's sessions.
		{name: "first NoCapacity", err: noCap, wantAgain: true, wantLookup: true, wantStale: true},
		{name: "NotAssigned", err: vdibroker.Errorf(vdibroker.ENotAssigned, "x"), wantAgain: true, wantLookup: true, wantStale: true},
		// Decided from the store already: the refusal stands.
		{name: "NoCapacity after the store round", start: connectRound{reloaded: true, lookup: true}, err: noCap},
		// Reloaded for another reason, but the user was not read yet.
		{name: "NoCapacity, reloaded but not looked up", start: connectRound{reloaded: true}, err: noCap, wantAgain: true, wantLookup: true},
		// R-C6: the store knows a session this server does not.
		{name: "user has a session", err: vdibroker.ErrUserHasSession, wantAgain: true, wantLookup: true},
		// R-P1: settings changed on another replica.
		{name: "pool changed", err: vdibroker.ErrPoolChanged, wantAgain: true, wantStale: true},
		// R-C4: a first lost race refreshes the host only (done by commit),
		// a second the whole pool.
		{name: "host full, first loss", err: vdibroker.ErrHostFull, wantAgain: true},
		{name: "host full, second loss", err: vdibroker.ErrHostFull, attempt: 1, wantAgain: true, wantStale: true},
		{name: "host taken, second loss", err: vdibroker.ErrHostTaken, attempt: 1, wantAgain: true, wantStale: true},
		// Anything else ends the connect.
		{name: "storage error", err: errors.New("disk I/O error")},
		// The chosen host was deleted since the view read it (another
		// replica, or an idle view decided on before its background
		// read): read the pool again, whose lookup ends the connect if the
		// pool is gone too.
		{name: "host not found at commit", err: vdibroker.Errorf(vdibroker.ENotFound, "session host \"h1\" not found"), wantAgain: true, wantStale: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := &staleMark{}
			r := tc.start
			got := r.again(tc.err, tc.attempt, v)
			if got != tc.wantAgain {
				t.Errorf("again = %v, want %v", got, tc.wantAgain)
			}
			if tc.wantAgain && r.lookup != tc.wantLookup {
				t.Errorf("lookup = %v, want %v", r.lookup, tc.wantLookup)
			}
			if v.stale != tc.wantStale {
				t.Errorf("view marked stale = %v, want %v", v.stale, tc.wantStale)
			}
		})
	}
}
