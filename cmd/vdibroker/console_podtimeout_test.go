package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestConsoleFederationChangeWithinPodTimeout_RG5: serve's console sends
// a global entitlement change to the other pods within --pod-timeout, as
// every pod-to-pod call (docs/federation.md, "Running a pod"). A peer
// that takes the connection and never answers (a pod stopped with
// SIGSTOP, a firewall that drops its packets) held the administrator's
// page for 10 s, the console's own bound, with the default --pod-timeout
// of 2 s. The page then says the peer did not take it.
//
// Not timed: every call to the peer is seen leaving with its deadline,
// which must be no further than --pod-timeout away (the console's own
// bound would leave 10 s), and the peer sees the call given up, not
// answered.
func TestConsoleFederationChangeWithinPodTimeout_RG5(t *testing.T) {
	var asked, given atomic.Int32 // the document sent to the peer; calls the peer saw given up
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == federation.DocumentPath {
			asked.Add(1)
		}
		// Read whole, or net/http does not watch the connection and
		// never cancels the handler's context.
		io.Copy(io.Discard, r.Body)
		select { // answers nothing until the caller gives up or the test ends
		case <-r.Context().Done():
			given.Add(1)
		case <-release:
		}
	}))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(release) }) // before hung.Close, which waits for its handlers
	const podTimeout = 300 * time.Millisecond
	var (
		mu    sync.Mutex
		calls []string // each call to the peer: what its deadline left it, when over --pod-timeout
		sent  int
	)
	m := startFederatedPodWrapped(t, podTimeout, func(next http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if "http://"+r.URL.Host == hung.URL {
				dl, ok := r.Context().Deadline()
				left := time.Until(dl) // the deadline was set before this call: within podTimeout unless another bound set it
				mu.Lock()
				sent++
				if !ok || left > podTimeout {
					calls = append(calls, fmt.Sprintf("%s %s: deadline %v, %s left", r.Method, r.URL.Path, ok, left))
				}
				mu.Unlock()
			}
			return next.RoundTrip(r)
		})
	})
	admin := vhttp.NewClient(m.URL(), m.AdminToken)
	if _, err := admin.PutFederation(t.Context(), &vdibroker.Federation{Generation: 1,
		Sites: []vdibroker.Site{{Name: "site1"}},
		Pods:  []vdibroker.Pod{{Name: "pod1", Site: "site1", URL: m.URL()}, {Name: "pod2", Site: "site1", URL: hung.URL}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "office", Users: []string{"alice"},
			Members: []vdibroker.Member{{Pod: "pod1", HostPool: "office-p1"}}}},
	}); err != nil {
		t.Fatal(err)
	}
	c := jarClient()
	res, err := c.PostForm(m.URL()+"/signin", url.Values{"csrf": {pageCSRF(t, c, m.URL()+"/signin")}, "next": {"/federation"}, "token": {m.AdminToken}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	csrf := pageCSRF(t, c, m.URL()+"/federation")
	res, err = c.PostForm(m.URL()+"/federation/globalentitlements/assignments", url.Values{"csrf": {csrf}, "generation": {"1"},
		"entitlement": {"office"}, "op": {"add"}, "kind": {"user"}, "principal": {"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	page := string(body)
	if asked.Load() != 1 || !strings.Contains(page, `data-result-pod="pod2" data-result="unreachable"`) || !strings.Contains(page, "did not take it") {
		t.Errorf("HTTP %d, the peer asked %d times; want pod2 unreachable on the page:\n%s", res.StatusCode, asked.Load(), page)
	}
	// Every call the page waited for was counted before it was written
	// (others, in the background, may still come: none may be unbounded).
	mu.Lock()
	n := sent
	mu.Unlock()
	if n == 0 {
		t.Fatal("no call to the peer went through the pod-to-pod client")
	}
	// The peer's server learns that a call was given up when it reads
	// the closed connection, some time after the page: a bound that only
	// ends a wait that would never end.
	e2eEventually(t, fmt.Sprintf("the peer to see its %d calls given up", n), time.Minute, func() bool { return given.Load() >= int32(n) })
	mu.Lock()
	if len(calls) > 0 {
		t.Errorf("calls to the peer over --pod-timeout (%s): %q; want every call bounded by it", podTimeout, calls)
	}
	mu.Unlock()
	if st, err := admin.GetFederation(t.Context()); err != nil || st.Document.Generation != 2 {
		t.Errorf("pod1 after the change: %+v, %v; want generation 2", st, err)
	}
}

// roundTripperFunc is an http.RoundTripper of a function.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
