package http_test

import (
	nethttp "net/http"
	"net/http/httptest"
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
