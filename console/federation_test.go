package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/console"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/testserver"
	"github.com/vdibroker/vdibroker/store"
)

// newPodEnv is newEnv on a broker that is pod fra1 of a federation, with
// the console's federation page enabled.
func newPodEnv(t *testing.T) *env {
	t.Helper()
	st, err := store.Open(context.Background(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	secret := []byte("console-test-federation-secret")
	srv := testserver.New(testserver.Config{Store: st, AdminToken: adminToken, Pod: "fra1",
		Peers: vhttp.NewPodClient("fra1", secret), PodTimeout: 500 * time.Millisecond, FederationSecret: secret})
	t.Cleanup(func() { srv.Close() })
	c := console.New(console.Config{API: srv.Handler(), Sessions: st})
	c.EnableFederation()
	t.Cleanup(func() { c.Close() })
	srv.Mux().Handle("/", c)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &env{t: t, url: ts.URL, store: st, admin: vhttp.NewClient(ts.URL, adminToken), agents: map[string]string{}}
}

// TestFederationPage: sites, pods with health and generation, and global
// entitlements with their members' loads.
func TestFederationPage(t *testing.T) {
	e := newPodEnv(t)
	e.seed("alice")
	b := e.browser()
	b.signin(adminToken)
	if !strings.Contains(b.get("/").body, `href="/federation"`) {
		t.Errorf("a pod's console nav has no federation link")
	}
	a := b.get("/federation")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, "no federation document")

	doc := &vdibroker.Federation{Generation: 7,
		Sites: []vdibroker.Site{{Name: "emea"}, {Name: "amer"}},
		Pods: []vdibroker.Pod{{Name: "fra1", Site: "emea", URL: e.url},
			// Nothing listens on port 1: the peer is unreachable.
			{Name: "nyc1", Site: "amer", URL: "http://127.0.0.1:1"}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "office", SessionDistribution: vdibroker.DistributionSessionCount,
			Members: []vdibroker.Member{{Pod: "fra1", HostPool: "pool-a"}, {Pod: "nyc1", HostPool: "office-nyc1"}}}},
	}
	if _, err := e.admin.PutFederation(t.Context(), doc); err != nil {
		t.Fatal(err)
	}
	a = b.get("/federation")
	wantStatus(t, a, http.StatusOK)
	// pool-a: 1 session on 3 hosts of limit 4: 1/12 = 0.0833.
	wantContains(t, a, "<strong>fra1</strong> in site <strong>emea</strong>", "generation <strong>7</strong>",
		`data-peer="nyc1"`, "unreachable", "Global entitlement office", `data-member="fra1/pool-a"`, "0.0833")
}
