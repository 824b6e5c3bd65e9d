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
	return newPodEnvNamed(t, "fra1")
}

// newPodEnvNamed is newPodEnv as pod pod.
func newPodEnvNamed(t *testing.T, pod string) *env {
	t.Helper()
	st, err := store.Open(context.Background(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	secret := []byte("console-test-federation-secret")
	srv := testserver.New(testserver.Config{Store: st, AdminToken: adminToken, Pod: pod,
		Peers: vhttp.NewPodClient(pod, secret), PodTimeout: 500 * time.Millisecond, FederationSecret: secret})
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

// TestUserSessionsInOtherPods_RU3: on a pod, one user's sessions page
// also lists her open sessions in the other pods' member pools, with the
// pod, and names a pod that did not answer with why; a user search, a
// pool filter and a broker that is no pod ask nothing of the others.
func TestUserSessionsInOtherPods_RU3(t *testing.T) {
	e := newPodEnv(t)
	e.seed("alice")
	far := newPodEnvNamed(t, "ams1")
	far.seed("alice", "bob")
	down := "http://127.0.0.1:1" // nothing listens on port 1
	doc := &vdibroker.Federation{Generation: 1, Sites: []vdibroker.Site{{Name: "emea"}},
		Pods: []vdibroker.Pod{{Name: "fra1", Site: "emea", URL: e.url}, {Name: "ams1", Site: "emea", URL: far.url}, {Name: "nyc1", Site: "emea", URL: down}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "office", SessionDistribution: vdibroker.DistributionSessionCount, AllUsers: true,
			Members: []vdibroker.Member{{Pod: "fra1", HostPool: "pool-a"}, {Pod: "ams1", HostPool: "pool-a"}, {Pod: "nyc1", HostPool: "pool-n"}}}},
	}
	for _, x := range []*env{e, far} {
		d := *doc
		if _, err := x.admin.PutFederation(t.Context(), &d); err != nil {
			t.Fatal(err)
		}
	}
	farAlice, err := far.admin.ListUserSessions(t.Context(), "pool-a", vhttp.SessionQuery{User: "alice"})
	if err != nil || len(farAlice) != 1 {
		t.Fatalf("alice's session on ams1: %v %v", farAlice, err)
	}
	b := e.browser()
	b.signin(adminToken)
	a := b.get("/sessions?user=alice&exact=1")
	wantStatus(t, a, http.StatusOK)
	wantContains(t, a, `id="other-pods"`, `<tr data-session="`+farAlice[0].ID+`" data-pod="ams1">`, `data-unanswered="nyc1"`, "Pod nyc1 did not answer: unreachable")
	if strings.Count(a.body, `data-pod="ams1"`) != 1 {
		t.Errorf("want alice's one session on ams1 alone (not bob's):\n%s", a.body)
	}
	for _, path := range []string{"/sessions?user=ali", "/sessions?user=alice&exact=1&pool=pool-a"} {
		if a := b.get(path); strings.Contains(a.body, `id="other-pods"`) {
			t.Errorf("%s lists the other pods", path)
		}
	}
	plain := newEnv(t)
	plain.seed("alice")
	pb := plain.browser()
	pb.signin(adminToken)
	if a := pb.get("/sessions?user=alice&exact=1"); a.status != http.StatusOK || strings.Contains(a.body, `id="other-pods"`) {
		t.Errorf("a broker that is no pod: %d, lists other pods", a.status)
	}
}
