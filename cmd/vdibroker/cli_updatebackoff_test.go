package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// pauseLog is an updateBackoff that sleeps not at all: it records each
// pause asked for, with what the test's probe said at that moment (how
// many reads the broker had answered, say), and draws its jitter from
// jitter (a fraction of n, so the bounds are tried).
type pauseLog struct {
	pauses []time.Duration
	at     []int
	probe  func() int
	jitter func(n int64) int64
	err    error // what Sleep answers (a cancelled context's error)
}

func (p *pauseLog) backoff() updateBackoff {
	return updateBackoff{
		Sleep: func(ctx context.Context, d time.Duration) error {
			p.pauses = append(p.pauses, d)
			if p.probe != nil {
				p.at = append(p.at, p.probe())
			}
			return p.err
		},
		Jitter: p.jitter,
	}
}

// TestUpdateIfMatchPauses_RE13: an update refused with 412 (another
// writer changed the object after it was read, R-E13) pauses before it
// reads again: 50 ms and up to as much again at random after the first
// refusal, 100 ms and up to as much again after the second, never more
// than 200 ms; it never pauses before its first attempt, after the one
// that lands, or after any other error; past the third attempt it gives
// up saying the object changed concurrently, that nothing was written
// and what to do; a context that ends in a pause ends the update there.
func TestUpdateIfMatchPauses_RE13(t *testing.T) {
	refused := &vdibroker.Error{Code: vdibroker.EPreconditionFailed, Message: "the object changed since it was read"}
	none := func(int64) int64 { return 0 }
	most := func(n int64) int64 { return n - 1 } // Int64N(n)'s largest
	for _, tc := range []struct {
		name      string
		answers   []error // one per attempt; nil lands
		jitter    func(int64) int64
		sleepErr  error
		want      []time.Duration // pauses, in order
		attempts  int
		wantErr   string // "" when it lands
		wantCode  string
		cancelled bool
	}{
		{"lands at once: no pause", []error{nil}, none, nil, nil, 1, "", "", false},
		// 50 ms + 0, then lands.
		{"refused once, least jitter", []error{refused, nil}, none, nil, []time.Duration{50 * time.Millisecond}, 2, "", "", false},
		// 50 ms + (50 ms - 1 ns), 100 ms + (100 ms - 1 ns): just below
		// 100 and 200 ms.
		{"refused twice, most jitter", []error{refused, refused, nil}, most, nil,
			[]time.Duration{100*time.Millisecond - 1, 200*time.Millisecond - 1}, 3, "", "", false},
		{"refused three times: gives up after the third, no pause after it", []error{refused, refused, refused}, none, nil,
			[]time.Duration{50 * time.Millisecond, 100 * time.Millisecond}, 3,
			"application group team-apps was changed by someone else while this update ran, 3 times: nothing of this update was written; " +
				"another administrator or script is changing it now: see what it holds (vdibroker applicationgroup show --name team-apps) and run the update again",
			vdibroker.EPreconditionFailed, false},
		{"another error: no pause, no attempt more", []error{vdibroker.Errorf(vdibroker.EInvalid, "bad")}, none, nil, nil, 1, "bad", vdibroker.EInvalid, false},
		{"cancelled in the pause: no attempt more", []error{refused, nil}, none, context.Canceled,
			[]time.Duration{50 * time.Millisecond}, 1, "stopped before it was written again", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &pauseLog{jitter: tc.jitter, err: tc.sleepErr}
			ctx := withUpdateBackoff(t.Context(), log.backoff())
			n := 0
			_, err := updateIfMatch(ctx, "application group team-apps", "vdibroker applicationgroup show --name team-apps", func() (int, error) {
				n++
				return n, tc.answers[n-1]
			})
			if fmt.Sprint(log.pauses) != fmt.Sprint(tc.want) || n != tc.attempts {
				t.Errorf("%d attempts with pauses %v, want %d with %v", n, log.pauses, tc.attempts, tc.want)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v, want it to land", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one saying %q", err, tc.wantErr)
			case tc.wantCode != "" && vdibroker.ErrorCode(err) != tc.wantCode:
				t.Errorf("error %v: code %s, want %s", err, vdibroker.ErrorCode(err), tc.wantCode)
			case tc.cancelled && !errors.Is(err, context.Canceled):
				t.Errorf("error %v, want context.Canceled", err)
			}
		})
	}
}

// TestCLIUpdateUnderChangePauses_RE13: applicationgroup update against a
// real broker whose group another writer changes after each of the
// update's reads: the CLI pauses after each refused write, before it
// reads again (the pauses happen with 1, then 2 reads answered, none
// after the third), and gives up after 3 with exit 1 and the line that
// says the group changed concurrently and what to do. Its pauses are
// the test's (no sleep); the jitter is the most it can be.
func TestCLIUpdateUnderChangePauses_RE13(t *testing.T) {
	b := startCLIBroker(t)
	b.ok("hostpool", "create", "--name", "teampool")
	b.ok("applicationgroup", "create", "--name", "team-apps", "--host-pool", "teampool", "--application-group-type", "RemoteApp", "--users", "alice")
	admin := vhttp.NewClient(b.m.URL(), b.m.AdminToken)
	var reads atomic.Int32
	server := hookProxy(t, b, "/api/v1/applicationgroups/team-apps", func(n int) {
		reads.Store(int32(n))
		if _, err := admin.PutApplicationGroup(t.Context(), "team-apps", map[string]any{"hostPool": "teampool", "applicationGroupType": "RemoteApp",
			"assignments": map[string]any{"users": []string{"alice"}}, "description": fmt.Sprint("write ", n)}); err != nil {
			t.Error(err)
		}
	})
	log := &pauseLog{probe: func() int { return int(reads.Load()) }, jitter: func(n int64) int64 { return n - 1 }}
	r := runCLIIn(t, withUpdateBackoff(t.Context(), log.backoff()),
		"applicationgroup", "update", "--name", "team-apps", "--add-users", "dave", "--server", server, "--token", b.m.AdminToken)
	const want = "error: application group team-apps was changed by someone else while this update ran, 3 times: nothing of this update was written; " +
		"another administrator or script is changing it now: see what it holds (vdibroker applicationgroup show --name team-apps) and run the update again\n"
	if r.code != 1 || r.stdout != "" || r.stderr != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1, nothing on stdout, stderr %q", r.code, r.stdout, r.stderr, want)
	}
	// 50 ms + 50 ms - 1 ns after the first read's refused write, 100 ms
	// + 100 ms - 1 ns after the second's.
	if got, want := fmt.Sprint(log.pauses, log.at), fmt.Sprint([]time.Duration{100*time.Millisecond - 1, 200*time.Millisecond - 1}, []int{1, 2}); got != want {
		t.Errorf("pauses and the reads answered before each: %s, want %s", got, want)
	}
	if reads.Load() != 3 {
		t.Errorf("%d reads, want 3", reads.Load())
	}
}
