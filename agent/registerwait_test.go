package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

// logRecords keeps log records' messages and attributes.
type logRecords struct {
	mu   sync.Mutex
	recs []map[string]string // "msg" and each attribute
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, m)
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }
func (l *logRecords) with(msg string) []map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]string
	for _, r := range l.recs {
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// TestRegistrationWaitsWhenThrottled_RSEC (R-SEC): a golden image's
// clone whose registration token has registered its burst of new hosts
// on the real broker (vhttp.NewHostsPerTokenBurst) is answered 429 with
// Retry-After: its agent does not stop, logs once what it waits for,
// waits the Retry-After (an injected clock: not a moment less), and
// registers once the broker's bucket has a place again.
func TestRegistrationWaitsWhenThrottled_RSEC(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	start := time.Now()
	var offset atomic.Int64 // the broker's clock: frozen, moved by the test
	srv := testserver.New(testserver.Config{Store: st, AdminToken: "admin", Now: func() time.Time {
		return start.Add(time.Duration(offset.Load()))
	}})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close() })
	admin := vhttp.NewClient(ts.URL, "admin")
	if _, err := admin.PutHostPool(ctx, "golden", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	tok, err := admin.CreateRegistrationToken(ctx, "golden", vhttp.RegistrationTokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The image's other clones took the token's burst.
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1)); i <= vhttp.NewHostsPerTokenBurst; i = int(next.Add(1)) {
				name := fmt.Sprintf("clone-%03d", i)
				if _, err := admin.Register(ctx, &vdibroker.RegisterRequest{Token: tok.Token, HostName: name, Address: name + ":3389"}); err != nil {
					failed.Store(err)
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("the burst's registrations: %v", err)
	}

	clk := clocktesting.NewFakeClock(start)
	logs := &logRecords{}
	a := newTestAgent(t, Config{Server: ts.URL, RegistrationToken: tok.Token, HostName: "clone-late", Clock: clk, Logger: slog.New(logs)})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	const waiting = "broker takes no more new hosts of this registration token for now; waiting to register again"
	waitFor(t, "the agent to wait for the broker's Retry-After", func() bool {
		if len(done) > 0 {
			err := <-done
			done <- err
			t.Fatalf("Run = %v after the 429, want it waiting to register again", err)
		}
		return clk.HasWaiters()
	})
	// One line for the wait, with the Retry-After the broker sent (1 s:
	// a new host a second) and the broker's answer naming its bound.
	wantBound := fmt.Sprintf("faster than %d at once", vhttp.NewHostsPerTokenBurst)
	if recs := logs.with(waiting); len(recs) != 1 || recs[0]["wait"] != "1s" || !strings.Contains(recs[0]["err"], wantBound) {
		t.Fatalf("log lines %q: %v; want one, waiting 1s, its err naming %q", waiting, recs, wantBound)
	}
	if _, err := admin.GetSessionHost(ctx, "golden", "clone-late"); vdibroker.ErrorCode(err) != vdibroker.ENotFound {
		t.Fatalf("clone-late before the wait: %v, want NotFound", err)
	}
	// Not a moment before the Retry-After.
	clk.Step(time.Second - time.Millisecond)
	if !clk.HasWaiters() {
		t.Fatal("the agent stopped waiting before the broker's Retry-After")
	}
	// The broker's bucket holds a place a second later; the agent's wait
	// ends.
	offset.Add(int64(time.Second))
	clk.Step(time.Millisecond)
	waitFor(t, "clone-late registered", func() bool {
		_, err := admin.GetSessionHost(ctx, "golden", "clone-late")
		return err == nil
	})
	// The broker's row is written before the agent reads the answer and
	// logs it: wait for the line, then count it.
	waitFor(t, "the agent's line of the registration", func() bool { return len(logs.with("host registered")) > 0 })
	if n := len(logs.with("host registered")); n != 1 {
		t.Errorf("%d log lines \"host registered\", want 1", n)
	}
	if n := len(logs.with(waiting)); n != 1 {
		t.Errorf("%d log lines %q after one wait, want 1", n, waiting)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run = %v after stop, want nil", err)
	}
	done <- nil
}

// TestRegistrationWait (R-SEC): what the agent waits for after each kind
// of failed registration. Backoff 1 ms..5 ms, so a Retry-After is the
// wait; a Retry-After past maxAskedWait is cut to it.
func TestRegistrationWait(t *testing.T) {
	for _, c := range []struct {
		name    string
		err     error
		want    time.Duration // 0: the backoff's step (at most 5 ms)
		waitFor bool          // the broker asked to wait
	}{
		{"429 with Retry-After", &vdibroker.Error{Code: vdibroker.ETooManyRequests, RetryAfter: 3 * time.Second}, 3 * time.Second, true},
		{"429 asking for an hour: 5 minutes", &vdibroker.Error{Code: vdibroker.ETooManyRequests, RetryAfter: time.Hour}, maxAskedWait, true},
		{"429 without Retry-After", &vdibroker.Error{Code: vdibroker.ETooManyRequests}, 0, true},
		{"503 with Retry-After", &transportError{status: http.StatusServiceUnavailable, retryAfter: 2 * time.Second}, 2 * time.Second, true},
		{"a proxy's 429", &transportError{status: http.StatusTooManyRequests, retryAfter: 7 * time.Second}, 7 * time.Second, true},
		{"502: unreachable", &transportError{status: http.StatusBadGateway}, 0, false},
		{"connection refused", errors.New("dial tcp: connection refused"), 0, false},
		{"a refusal (fatal)", &vdibroker.Error{Code: vdibroker.EUnauthenticated, Message: "registration token expired"}, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := backoff{base: time.Millisecond, max: 5 * time.Millisecond, rand: rand.New(rand.NewPCG(1, 2))}
			got, what := registrationWait(fmt.Errorf("register: %w", c.err), &b)
			if (what != "") != c.waitFor {
				t.Errorf("waiting for %q, want a wait the broker asked for: %v", what, c.waitFor)
			}
			if c.want != 0 && got != c.want || c.want == 0 && (got <= 0 || got > 5*time.Millisecond) {
				t.Errorf("wait %s, want %s (0: a backoff step)", got, c.want)
			}
		})
	}
	for _, c := range []struct {
		v    string
		want time.Duration
	}{{"1", time.Second}, {"120", 2 * time.Minute}, {"", 0}, {"0", 0}, {"-1", 0}, {"+5", 0}, {"0005", 5 * time.Second}, {"3600", time.Hour},
		// Past maxRetryAfter: taken as it, a long wait asked for.
		{"3601", time.Hour}, {"99999999999999999999999", time.Hour},
		{"Wed, 21 Oct 2015 07:28:00 GMT", 0}, {"5s", 0}} {
		if got := retryAfter(c.v); got != c.want {
			t.Errorf("retryAfter(%q) = %s, want %s", c.v, got, c.want)
		}
	}
}

// TestRegistrationWaitEndsOnStop_RSEC (R-SEC): an agent told to wait
// (429 with a Retry-After of an hour, here from the broker's stand-in)
// waits maxAskedWait, not the hour and not a moment less, sends
// nothing while it waits (one registration a wait: no spinning), and
// returns nil at once when it is stopped in the middle of a wait (the
// Windows service's Stop cancels Run's context).
func TestRegistrationWaitEndsOnStop_RSEC(t *testing.T) {
	b := newFakeBroker(t)
	b.locked(func() { b.throttle = "3600" })
	clk := clocktesting.NewFakeClock(time.Now())
	a := newTestAgent(t, Config{Server: b.srv.URL, Clock: clk})
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	calls := func() (n int) {
		b.locked(func() { n = b.registerCalls })
		return n
	}
	waitFor(t, "the agent to wait after the first 429", clk.HasWaiters)
	if n := calls(); n != 1 {
		t.Fatalf("%d registrations before the first wait, want 1", n)
	}
	clk.Step(maxAskedWait - time.Millisecond)
	if !clk.HasWaiters() || calls() != 1 {
		t.Fatalf("a moment before %s: waiting %v, %d registrations; want still waiting after 1", maxAskedWait, clk.HasWaiters(), calls())
	}
	clk.Step(time.Millisecond)
	waitFor(t, "the second registration, then its wait", func() bool { return calls() == 2 && clk.HasWaiters() })
	stop()
	waitFor(t, "Run to return once stopped in a wait", func() bool { return len(done) > 0 })
	if err := <-done; err != nil {
		t.Errorf("Run = %v after a stop in a wait, want nil", err)
	}
	if n := calls(); n != 2 {
		t.Errorf("%d registrations, want 2 (one a wait)", n)
	}
}

// TestRegistrationRefusedAfterWaitIsFatal_RSEC (R-SEC): a wait the
// broker asked for changes nothing of what cannot be retried: the
// registration after it, refused because the token is no longer valid,
// ends Run with the broker's answer, as before any wait.
func TestRegistrationRefusedAfterWaitIsFatal_RSEC(t *testing.T) {
	b := newFakeBroker(t)
	b.locked(func() { b.throttle = "1" })
	clk := clocktesting.NewFakeClock(time.Now())
	a := newTestAgent(t, Config{Server: b.srv.URL, Clock: clk})
	done := make(chan error, 1)
	go func() { done <- a.Run(t.Context()) }()
	waitFor(t, "the agent to wait after the 429", clk.HasWaiters)
	b.locked(func() { b.throttle, b.tokenValid = "", false })
	clk.Step(time.Second)
	waitFor(t, "Run to return after the refusal", func() bool { return len(done) > 0 })
	if err := <-done; !errors.Is(err, errFatal) || vdibroker.ErrorCode(err) != vdibroker.EUnauthenticated {
		t.Errorf("Run = %v, want the broker's Unauthenticated answer, fatal", err)
	}
}

// TestHeartbeatWaitsWhenAsked_RSEC (R-SEC): a heartbeat answered 429
// (the broker: heartbeats of this host faster than it takes them) or 503
// (a broker without its database, a proxy before it) waits the answer's
// Retry-After (an injected clock: not a moment less), capped at
// maxHeartbeatWait, not the backoff's first step: a proxy asking for
// minutes must not keep the host silent past its pool's
// heartbeatTimeoutSeconds (90 s by default) longer than an unreachable
// broker would (the backoff's minute, R-H1); sends nothing while it
// waits; logs one line of the wait; heartbeats again after it; and Run
// returns nil at once when stopped in the middle of a wait.
func TestHeartbeatWaitsWhenAsked_RSEC(t *testing.T) {
	for _, c := range []struct {
		name       string
		status     int
		retryAfter string
		want       time.Duration
		msg        string
	}{
		{"429 Retry-After 30", http.StatusTooManyRequests, "30", 30 * time.Second, "broker answered 429 to the heartbeat; waiting to heartbeat again"},
		{"503 Retry-After 20", http.StatusServiceUnavailable, "20", 20 * time.Second, "broker answered 503 to the heartbeat; waiting to heartbeat again"},
		// Two hours: taken as an hour (maxRetryAfter), waited a minute
		// (maxHeartbeatWait), not the 5 minutes of a registration.
		{"429 asking for two hours", http.StatusTooManyRequests, "7200", time.Minute, "broker answered 429 to the heartbeat; waiting to heartbeat again"},
		// A proxy's maintenance page asking for 10 minutes: a minute.
		{"503 Retry-After 600", http.StatusServiceUnavailable, "600", time.Minute, "broker answered 503 to the heartbeat; waiting to heartbeat again"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newFakeBroker(t)
			b.locked(func() { b.heartbeatStatus, b.heartbeatRetryAfter = c.status, c.retryAfter })
			clk := clocktesting.NewFakeClock(time.Now())
			logs := &logRecords{}
			// An hour's heartbeat interval: a wait other than the asked
			// one would show as another length.
			a := newTestAgent(t, Config{Server: b.srv.URL, Clock: clk, Logger: slog.New(logs), HeartbeatInterval: time.Hour})
			ctx, stop := context.WithCancel(t.Context())
			defer stop()
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx) }()
			calls := func() (n int) {
				b.locked(func() { n = b.heartbeatCalls })
				return n
			}
			waitFor(t, "the agent to wait after the first heartbeat", func() bool { return calls() == 1 && clk.HasWaiters() })
			if recs := logs.with(c.msg); len(recs) != 1 || recs[0]["wait"] != c.want.String() {
				t.Fatalf("log lines %q: %v; want one, waiting %s", c.msg, recs, c.want)
			}
			clk.Step(c.want - time.Millisecond)
			if !clk.HasWaiters() || calls() != 1 {
				t.Fatalf("a moment before %s: waiting %v, %d heartbeats; want still waiting after 1", c.want, clk.HasWaiters(), calls())
			}
			clk.Step(time.Millisecond)
			waitFor(t, "the second heartbeat, then its wait", func() bool { return calls() == 2 && clk.HasWaiters() })
			if n := len(logs.with(c.msg)); n != 1 {
				t.Errorf("%d log lines %q after two waits, want 1", n, c.msg)
			}
			// The broker takes heartbeats again: the next one, after the
			// asked wait, is answered and the agent heartbeats as before.
			b.locked(func() { b.heartbeatStatus = 0 })
			clk.Step(c.want)
			waitFor(t, "the third heartbeat, answered", func() bool { return b.heartbeatCount() == 1 && clk.HasWaiters() })
			if n := len(logs.with("heartbeating")); n != 1 {
				t.Errorf("%d log lines \"heartbeating\" once answered, want 1", n)
			}
			b.locked(func() { b.heartbeatStatus = c.status })
			clk.Step(time.Hour)
			waitFor(t, "the fourth heartbeat, then its wait", func() bool { return calls() == 4 && clk.HasWaiters() })
			stop()
			waitFor(t, "Run to return once stopped in a wait", func() bool { return len(done) > 0 })
			if err := <-done; err != nil {
				t.Errorf("Run = %v after a stop in a wait, want nil", err)
			}
		})
	}
}
