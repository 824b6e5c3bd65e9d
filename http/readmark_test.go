package http_test

import (
	"context"
	"log/slog"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

// TestPodReadsFromAndStopPodCalls_RG5: a pod on a one-process store takes
// pod-to-pod reads from Config.ReadsFrom when it is after the server's
// start (the second after the read mark the process before left), over a
// real server; once StopPodCalls (the program's shutdown, before it lets
// go of its store) it refuses every pod-to-pod call, 503, and leaves a
// mark no earlier than its window's start, so the next process does not
// start before it.
func TestPodReadsFromAndStopPodCalls_RG5(t *testing.T) {
	st, err := store.Open(t.Context(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	t0 := time.Now().Truncate(time.Second)
	clk := func() time.Time { return t0 }
	secret := []byte(testFedSecret)
	srv := testserver.New(testserver.Config{Store: st, AdminToken: adminToken, Pod: "pod1", Site: "s",
		Peers: vhttp.NewPodClient("pod1", secret), FederationSecret: secret, OneProcessStore: true, Now: clk,
		ReadsFrom: t0.Add(3 * time.Second)})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close() })
	call := func(method, path, body string, signed time.Time) int {
		t.Helper()
		return podCallStatus(t, ts.URL, method, path, body, signedBy("pod2", secret, method, path, body, signed))
	}
	if got := call("GET", federation.LoadsPath, "", t0.Add(2*time.Second)); got != nethttp.StatusUnauthorized {
		t.Errorf("a read signed at t0+2s, before ReadsFrom t0+3s: %d, want 401", got)
	}
	if got := call("GET", federation.LoadsPath, "", t0.Add(3*time.Second)); got != nethttp.StatusOK {
		t.Fatalf("a read signed at ReadsFrom: %d, want 200", got)
	}

	if err := srv.StopPodCalls(t.Context()); err != nil {
		t.Fatal(err)
	}
	connectBody := `{"globalEntitlement":"none","hostPool":"none","user":"alice"}`
	for _, c := range []struct{ method, path, body string }{
		{"GET", federation.LoadsPath, ""},
		{"POST", federation.ConnectPath, connectBody},
		{"PUT", federation.DocumentPath, "{}"},
	} {
		if got := call(c.method, c.path, c.body, t0.Add(3*time.Second)); got != nethttp.StatusServiceUnavailable {
			t.Errorf("%s %s after StopPodCalls: %d, want 503", c.method, c.path, got)
		}
	}
	// The read was verified at t0 (the server's clock), before its
	// window's start: the mark keeps that start, t0+3s (its second
	// before, t0+2s, then the second after it).
	from, err := federation.ReadsFrom(t.Context(), st, t0)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(3 * time.Second); !from.Equal(want) {
		t.Errorf("the next process's reads from t0+%s, want t0+3s", from.Sub(t0))
	}
}

// markLog keeps the log records about the read mark.
type markLog struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *markLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *markLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *markLog) WithGroup(string) slog.Handler            { return h }
func (h *markLog) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "pod-to-pod read mark") {
		h.mu.Lock()
		h.records = append(h.records, r)
		h.mu.Unlock()
	}
	return nil
}

// take returns the records kept since the last take, each as its level,
// message and attributes (err's value cut to its first word).
func (h *markLog) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var lines []string
	for _, r := range h.records {
		line := r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool {
			line += " " + a.Key + "=" + a.Value.String()
			return true
		})
		lines = append(lines, line)
	}
	h.records = nil
	return lines
}

// TestReadMarkOutageLoggedOnce_ROUT1 (R-OUT1): a pod on a one-process
// store whose read mark cannot be moved for an hour (the store refuses
// its writes) says so once when the moves start failing, with the error,
// then reminds at doubling waits from a minute (60 s, then 2, 4, 8,
// 16 min: at 60, 180, 420, 900 and 1,860 s into it), with the count of
// failed moves, and says once, with how long, when a move goes through
// again; a later failure is a new outage, said at once. Before, each of
// the 720 failed moves (one every 5 s) logged a warning.
func TestReadMarkOutageLoggedOnce_ROUT1(t *testing.T) {
	// The store made to fail: its writes of the mark are refused by the
	// database itself, through the store's own write path.
	st := openRawStore(t, "")
	down := func() {
		for _, op := range []string{"INSERT", "UPDATE"} {
			st.exec(`CREATE TRIGGER mark_fails_` + op + ` BEFORE ` + op + ` ON shared_values WHEN NEW.name = 'pod-reads-verified-before'
				BEGIN SELECT RAISE(ABORT, 'disk full'); END`)
		}
	}
	up := func() { st.exec(`DROP TRIGGER mark_fails_INSERT`); st.exec(`DROP TRIGGER mark_fails_UPDATE`) }

	t0 := time.Now().Truncate(time.Second)
	var mu sync.Mutex
	now := t0
	clk := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(at time.Duration) { mu.Lock(); now = t0.Add(at); mu.Unlock() }
	logs := &markLog{}
	secret := []byte(testFedSecret)
	srv := testserver.New(testserver.Config{Store: st.Store, AdminToken: adminToken, Pod: "pod1", Site: "s",
		Peers: vhttp.NewPodClient("pod1", secret), FederationSecret: secret, OneProcessStore: true, Now: clk,
		Logger: slog.New(logs)})
	t.Cleanup(func() { srv.Close() })

	ctx, cancel := context.WithCancel(t.Context())
	ticks, moved, done := make(chan time.Time), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		vhttp.KeepReadMarkOn(ctx, srv.Server, ticks, func() { moved <- struct{}{} })
	}()
	t.Cleanup(func() { cancel(); <-done })
	<-moved // the first move, at t0
	// tick moves the mark at t0 + n × 5 s.
	tick := func(n int) {
		set(time.Duration(n) * 5 * time.Second)
		ticks <- clk()
		<-moved
	}
	if got := logs.take(); len(got) != 0 {
		t.Fatalf("a move that went through logged %q", got)
	}

	down()
	tick(1)
	got := logs.take()
	if len(got) != 1 || !strings.HasPrefix(got[0], "WARN pod-to-pod read mark") || !strings.Contains(got[0], "disk full") {
		t.Fatalf("the first failed move logged %q, want one warning with its error", got)
	}
	for n := 2; n <= 720; n++ { // an hour of failed moves, t0+10s to t0+3600s
		tick(n)
	}
	// Reminders at 60, 180, 420, 900 and 1,860 s after the first failure
	// (t0+5s): ticks 13, 37, 85, 181 and 373, each the count of failures.
	want := []string{"failingFor=1m0s failures=13", "failingFor=3m0s failures=37", "failingFor=7m0s failures=85",
		"failingFor=15m0s failures=181", "failingFor=31m0s failures=373"}
	got = logs.take()
	if len(got) != len(want) {
		t.Fatalf("an hour of failed moves logged %d lines after the first, want %d reminders:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], "WARN pod-to-pod read mark: still failing "+w+" err=") {
			t.Errorf("reminder %d: %q, want %s", i, got[i], w)
		}
	}

	up()
	tick(721)
	got = logs.take()
	if len(got) != 1 || got[0] != "INFO pod-to-pod read mark: works again failedFor=1h0m0s failures=720" {
		t.Fatalf("the first move after the outage logged %q, want it working again after 1h and 720 failures", got)
	}
	// The mark moved: the next process starts its reads after t0+3605s
	// (2 × 5 s ahead).
	if from, err := federation.ReadsFrom(t.Context(), st.Store, t0); err != nil || !from.After(t0.Add(3605*time.Second)) {
		t.Errorf("ReadsFrom after the outage = t0+%s, %v; want after t0+3605s", from.Sub(t0), err)
	}
	tick(722)
	if got := logs.take(); len(got) != 0 {
		t.Errorf("a move after the outage logged %q", got)
	}
	down()
	tick(723)
	if got := logs.take(); len(got) != 1 || !strings.HasPrefix(got[0], "WARN pod-to-pod read mark: not moved") {
		t.Errorf("the first failed move of a second outage logged %q, want one warning", got)
	}
}
