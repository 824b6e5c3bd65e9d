package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
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
func TestConsoleFederationChangeWithinPodTimeout_RG5(t *testing.T) {
	var asked atomic.Int32 // the document sent to the peer
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == federation.DocumentPath {
			asked.Add(1)
		}
		<-release // answers nothing until the test ends
	}))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(release) }) // before hung.Close, which waits for its handlers
	const podTimeout = 300 * time.Millisecond
	m := startFederatedPod(t, podTimeout)
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
	start := time.Now()
	res, err = c.PostForm(m.URL()+"/federation/globalentitlements/assignments", url.Values{"csrf": {csrf}, "generation": {"1"},
		"entitlement": {"office"}, "op": {"add"}, "kind": {"user"}, "principal": {"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	page := string(body)
	// The page reads the peers' state (within --pod-timeout each time)
	// and sends the document (within it again): about a second; 10 s
	// and more before.
	if took > 5*time.Second {
		t.Errorf("the change took %s with a peer that does not answer, want within a few --pod-timeout (%s)", took, podTimeout)
	}
	if asked.Load() != 1 || !strings.Contains(page, `data-result-pod="pod2" data-result="unreachable"`) || !strings.Contains(page, "did not take it") {
		t.Errorf("HTTP %d, the peer asked %d times; want pod2 unreachable on the page:\n%s", res.StatusCode, asked.Load(), page)
	}
	if st, err := admin.GetFederation(t.Context()); err != nil || st.Document.Generation != 2 {
		t.Errorf("pod1 after the change: %+v, %v; want generation 2", st, err)
	}
}
