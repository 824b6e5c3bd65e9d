package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	nethttp "net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	vhttp "github.com/vdibroker/vdibroker/http"
	"github.com/vdibroker/vdibroker/internal/stacks"
)

// TestGlobalSessionsSites_RU3: alice's sessions in pod1 (of pod0's site
// s0) and pod2 (of site s1), listed at pod0, each say their pod's site,
// and the answer pod0's own: a client tells a session in another pod of
// its site from one at another site.
func TestGlobalSessionsSites_RU3(t *testing.T) {
	envs := fedPods(t, 3, 1, 5, vdibroker.DistributionNone)
	ctx := t.Context()
	for i := 1; i <= 2; i++ {
		envs[i].mustConnect(fmt.Sprintf("office-pod%d", i), "alice")
	}
	got, err := envs[0].client(0, envs[0].userToken("alice", nil)).GlobalSessions(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	sites := map[string]string{}
	for _, s := range got.Value {
		sites[s.Pod] = s.Site
	}
	if got.Site != "s0" || len(sites) != 2 || sites["pod1"] != "s0" || sites["pod2"] != "s1" {
		raw, _ := json.Marshal(got)
		t.Errorf("alice's sessions in other pods: %s; want site s0, pod1's s0 and pod2's s1", raw)
	}
	// An end user granted no global entitlement learns no site.
	st, err := envs[0].admin.GetFederation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc := *st.Document
	doc.Generation++
	doc.GlobalEntitlements = slices.Clone(doc.GlobalEntitlements)
	doc.GlobalEntitlements[0].Users = []string{"alice"}
	for _, e := range envs {
		d := doc
		if _, err := e.admin.PutFederation(ctx, &d); err != nil {
			t.Fatal(err)
		}
	}
	bobs, err := envs[0].client(0, envs[0].userToken("bob", nil)).GlobalSessions(ctx, "bob")
	if err != nil || bobs.Site != "" || len(bobs.Value) != 0 {
		t.Errorf("bob, granted none: %+v %v; want nothing, not even this pod's site", bobs, err)
	}
}

// TestGlobalSessions_RU3: GET /users/{user}/globalsessions on pod0 lists
// alice's open sessions in the other pods' member pools (not pod0's own,
// which the pool's list has, nor another user's), each with its pod and
// its global entitlements; an end user lists only its own, a scoped
// token and a Gateway token none; a pod that does not answer is named,
// and the others' sessions are still listed. A broker that is no pod
// answers 404.
func TestGlobalSessions_RU3(t *testing.T) {
	envs := fedPods(t, 3, 1, 5, vdibroker.DistributionNone)
	ctx := context.Background()
	connect := func(i int, user string) string {
		t.Helper()
		a, err := envs[i].admin.Connect(ctx, fmt.Sprintf("office-pod%d", i), vhttp.ConnectRequest{User: user})
		if err != nil {
			t.Fatal(err)
		}
		return a.SessionID
	}
	connect(0, "alice")
	remote := connect(1, "alice")
	connect(2, "bob")
	e := envs[0]
	alice := e.client(0, e.userToken("ALICE", nil))
	got, err := alice.GlobalSessions(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Value) != 1 || got.Value[0].ID != remote || got.Value[0].Pod != "pod1" || got.Value[0].HostPool != "office-pod1" ||
		len(got.Value[0].GlobalEntitlements) != 1 || got.Value[0].GlobalEntitlements[0] != "office" || len(got.Unanswered) != 0 {
		raw, _ := json.Marshal(got)
		t.Fatalf("alice's sessions in other pods: %s; want pod1's %s alone", raw, remote)
	}
	for _, c := range []struct {
		name, token, user string
		status            int
	}{
		{"alice for bob", e.userToken("alice", nil), "bob", nethttp.StatusForbidden},
		{"alice scoped to a pool", e.userToken("alice", nil, "office-pod0"), "alice", nethttp.StatusForbidden},
		{"a Gateway token", e.roleToken("Gateway", "rdgw"), "alice", nethttp.StatusForbidden},
		{"no token", "", "alice", nethttp.StatusUnauthorized},
		{"a Reader", e.roleToken("Reader", "auditor"), "alice", nethttp.StatusOK},
	} {
		if status, _, raw := rawDo(t, e, "GET", "/api/v1/users/"+c.user+"/globalsessions", c.token, ""); status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, status, raw, c.status)
		}
	}

	envs[2].down()
	got, err = alice.GlobalSessions(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Value) != 1 || got.Value[0].ID != remote || got.Unanswered["pod2"] != "did not answer" || len(got.Unanswered) != 1 {
		raw, _ := json.Marshal(got)
		t.Errorf("with pod2 down: %s; want pod1's session and pod2 named, without its address", raw)
	}
	// An administrator reads why.
	if got, err := e.admin.GlobalSessions(ctx, "alice"); err != nil || !strings.HasPrefix(got.Unanswered["pod2"], "unreachable: ") {
		t.Errorf("with pod2 down, to the admin: %+v %v; want why", got, err)
	}

	if status, _, raw := rawDo(t, newEnv(t), "GET", "/api/v1/users/alice/globalsessions", adminToken, ""); status != nethttp.StatusNotFound {
		t.Errorf("a broker that is no pod: %d %s, want 404", status, raw)
	}
}

// TestGlobalSessionsPeerAnswerChecked_RU3: what a peer answers is input:
// sessions of another user, of a pool that is not its member, ended ones,
// ones in no state a session has, and a session's id again are not
// listed.
func TestGlobalSessionsPeerAnswerChecked_RU3(t *testing.T) {
	now := time.Now().UTC()
	envs := fedPodsWith(t, 2, 1, 5, vdibroker.DistributionNone, false, func(i int, h nethttp.Handler) nethttp.Handler {
		if i != 1 {
			return h
		}
		return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			if r.URL.Path != federation.SessionsPath {
				h.ServeHTTP(w, r)
				return
			}
			s := func(id, user, pool, state string) *vdibroker.UserSession {
				return &vdibroker.UserSession{ID: id, User: user, HostPool: pool, SessionHost: "h", State: state, CreateTime: now, StateTime: now}
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(vdibroker.PodSessions{Sessions: []*vdibroker.UserSession{
				s("ok", "Alice", "office-pod1", vdibroker.StateDisconnected),
				s("other-user", "bob", "office-pod1", vdibroker.StateActive),
				s("other-pool", "alice", "payroll", vdibroker.StateActive),
				s("ended", "alice", "office-pod1", vdibroker.StateLoggedOff),
				s("no-state", "alice", "office-pod1", `<b>Hacked</b>`),
				s("ok", "alice", "office-pod1", vdibroker.StateActive), // "ok" again
			}})
		})
	})
	e := envs[0]
	got, err := e.client(0, e.userToken("alice", nil)).GlobalSessions(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Value) != 1 || got.Value[0].ID != "ok" {
		raw, _ := json.Marshal(got)
		t.Errorf("a peer's answer: %s; want its session \"ok\" alone", raw)
	}
}

// TestGlobalSessionsThroughDirectory_RU3_RG1: with five pods, listing a
// user's sessions in other pods asks the user's directory pod, then only
// the pods it names, as a global connect does: not a fan-out to every
// pod on each portal page.
func TestGlobalSessionsThroughDirectory_RU3_RG1(t *testing.T) {
	envs := fedPods(t, 5, 1, 20, vdibroker.DistributionNone)
	ctx := t.Context()
	// pod4's status: its load summaries of its peers, cached before
	// their passes, say they are behind; pod0 asks nobody before them.
	st, err := envs[4].admin.GetFederation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	alice := userOf(st.Document, "alice", "pod2")
	id := envs[3].mustConnect("office-pod3", alice).SessionID
	directoryPass(t, envs)
	e := envs[0]
	user := e.client(0, e.userToken(alice, nil))
	takeCalls(envs)
	got, err := user.GlobalSessions(ctx, alice)
	if err != nil || len(got.Value) != 1 || got.Value[0].ID != id || got.Value[0].Pod != "pod3" {
		t.Fatalf("%s's sessions: %+v %v; want %s on pod3", alice, got, err, id)
	}
	calls := takeCalls(envs)
	if asked := sessionCalls(envs, calls); len(asked) != 1 || asked[0] != 3 {
		t.Errorf("pods asked for %s's sessions: %v; want pod3 alone (the directory named it)", alice, asked)
	}
	if calls[envs[2].urls[0]+federation.LookupPath] != 1 {
		t.Errorf("calls %v: want one look-up at pod2, %s's directory pod", calls, alice)
	}
}

// TestGlobalSessionsEndUserEntitled_RU3_RE9: an end user's sessions in
// other pods are asked for in the member pools of the global entitlements
// that grant her, as her global connect would (R-E9): alice, granted
// "east" (pod1's pool) alone, lists her session on pod1 named by "east"
// only, and pod2 is not asked; carol, granted none, makes no pod-to-pod
// call at all (any valid identity reaches the route: it must not be a
// fan-out to every pod for free). The admin still sees both of alice's,
// with every entitlement of the pool.
func TestGlobalSessionsEndUserEntitled_RU3_RE9(t *testing.T) {
	envs := fedPods(t, 3, 1, 5, vdibroker.DistributionNone)
	ctx := t.Context()
	var ids []string
	for _, i := range []int{1, 2} {
		ids = append(ids, envs[i].mustConnect(fmt.Sprintf("office-pod%d", i), "alice").SessionID)
	}
	st, err := envs[0].admin.GetFederation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc := *st.Document
	doc.Generation++
	office := doc.GlobalEntitlements[0]
	office.Users = []string{"bob"}
	east := vdibroker.GlobalEntitlement{Name: "east", SessionDistribution: vdibroker.DistributionNone, Users: []string{"alice"},
		Members: []vdibroker.Member{{Pod: "pod1", HostPool: "office-pod1"}}}
	doc.GlobalEntitlements = []vdibroker.GlobalEntitlement{office, east}
	for _, e := range envs {
		d := doc
		if _, err := e.admin.PutFederation(ctx, &d); err != nil {
			t.Fatal(err)
		}
	}
	e := envs[0]
	alice, carol := e.client(0, e.userToken("alice", nil)), e.client(0, e.userToken("carol", nil))
	takeCalls(envs)
	got, err := alice.GlobalSessions(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := json.Marshal(got); len(got.Value) != 1 || got.Value[0].ID != ids[0] || !slices.Equal(got.Value[0].GlobalEntitlements, []string{"east"}) {
		t.Errorf("alice's own: %s; want pod1's %s, named by east alone", raw, ids[0])
	}
	if asked := sessionCalls(envs, takeCalls(envs)); !slices.Equal(asked, []int{1}) {
		t.Errorf("pods asked for alice's sessions: %v; want pod1 alone (east's)", asked)
	}
	if got, err := carol.GlobalSessions(ctx, "carol"); err != nil || len(got.Value) != 0 {
		t.Errorf("carol's: %+v %v; want none", got, err)
	}
	if calls := takeCalls(envs); len(calls) != 0 {
		t.Errorf("carol, granted no global entitlement, made pod-to-pod calls: %v", calls)
	}
	got, err = e.admin.GlobalSessions(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := json.Marshal(got); len(got.Value) != 2 || !slices.Equal(got.Value[0].GlobalEntitlements, []string{"office", "east"}) {
		t.Errorf("alice's, to the admin: %s; want both, pod1's with office and east", raw)
	}
}

// TestGlobalSessionsFailedLoadsNotAskedAgain_RU3_RG1: a pod the directory
// does not name is asked for the user's sessions only when its load
// summary says it is behind; when that summary cannot be read, the pod is
// named as not answering at once, as a global connect names it (R-G5),
// not asked again for the sessions: against a pod that hangs, that second
// call was a second pod timeout the portal's page waited out.
func TestGlobalSessionsFailedLoadsNotAskedAgain_RU3_RG1(t *testing.T) {
	var failLoads atomic.Bool // after the directory passes, which read loads too
	envs := fedPodsWith(t, 5, 1, 20, vdibroker.DistributionNone, false, func(i int, h nethttp.Handler) nethttp.Handler {
		if i != 3 {
			return h
		}
		return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			if r.URL.Path == federation.LoadsPath && failLoads.Load() {
				nethttp.Error(w, "overloaded", nethttp.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	ctx := t.Context()
	// Read at pod4: pod0 caches no load summary before the passes.
	st, err := envs[4].admin.GetFederation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	alice := userOf(st.Document, "alice", "pod2")
	directoryPass(t, envs)
	e := envs[0]
	user := e.client(0, e.userToken(alice, nil))
	failLoads.Store(true)
	takeCalls(envs)
	got, err := user.GlobalSessions(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	calls := takeCalls(envs)
	if calls[envs[3].urls[0]+federation.LoadsPath] != 1 || calls[envs[3].urls[0]+federation.SessionsPath] != 0 {
		t.Errorf("calls to pod3: %v; want its loads once, its sessions never", calls)
	}
	if raw, _ := json.Marshal(got); len(got.Value) != 0 || got.Unanswered["pod3"] == "" {
		t.Errorf("%s's sessions: %s; want none, pod3 named", alice, raw)
	}
}

// TestGlobalSessionsReconnect_RU3_RG1: a session is said to be reached
// through an entitlement only when its pod is in that entitlement's
// scope from the pod asked (R-G1): with a WithinSite entitlement, pod0's
// global connect looks in pod1 (its site, s0), not in pod2 (s1), and
// would make a new session instead of reaching the one there; the
// portal's Reconnect must not be offered for it.
func TestGlobalSessionsReconnect_RU3_RG1(t *testing.T) {
	envs := fedPods(t, 3, 1, 5, vdibroker.DistributionNone)
	ctx := t.Context()
	ids := map[string]string{}
	for _, i := range []int{1, 2} {
		ids[fmt.Sprintf("pod%d", i)] = envs[i].mustConnect(fmt.Sprintf("office-pod%d", i), "alice").SessionID
	}
	st, err := envs[0].admin.GetFederation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc := *st.Document
	doc.Generation++
	doc.GlobalEntitlements = slices.Clone(doc.GlobalEntitlements)
	doc.GlobalEntitlements[0].Scope = vdibroker.ScopeWithinSite
	for _, e := range envs {
		d := doc
		if _, err := e.admin.PutFederation(ctx, &d); err != nil {
			t.Fatal(err)
		}
	}
	e := envs[0]
	for _, c := range []struct {
		name string
		cl   *vhttp.Client
	}{{"alice", e.client(0, e.userToken("alice", nil))}, {"the admin", e.admin}} {
		got, err := c.cl.GlobalSessions(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][]string{"pod1": {"office"}, "pod2": {}}
		raw, _ := json.Marshal(got)
		if len(got.Value) != 2 {
			t.Fatalf("%s: %s; want alice's two sessions", c.name, raw)
		}
		for _, s := range got.Value {
			if s.ID != ids[s.Pod] || !slices.Equal(s.Reconnect, want[s.Pod]) {
				t.Errorf("%s: %s; want pod1's reached through office, pod2's through none", c.name, raw)
			}
		}
	}
}

// TestGlobalSessionsCoalesced_RU3_RG1: one user's listings at once on a
// pod share one round of pod-to-pod calls: four at once make one look-up
// at her directory pod, not four. A global connect takes one user's
// connects one at a time; without this, one end user's parallel requests
// made as many signed calls as she liked, each spending this pod's
// budget of calls at its peers (R-G5).
func TestGlobalSessionsCoalesced_RU3_RG1(t *testing.T) {
	release := make(chan struct{})
	envs := fedPodsWith(t, 5, 1, 20, vdibroker.DistributionNone, false, func(i int, h nethttp.Handler) nethttp.Handler {
		return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			if r.URL.Path == federation.LookupPath {
				select { // held until every listing is under way
				case <-release:
				case <-r.Context().Done():
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	ctx := t.Context()
	st, err := envs[4].admin.GetFederation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	alice := userOf(st.Document, "alice", "pod2")
	e := envs[0]
	user := e.client(0, e.userToken(alice, nil))
	takeCalls(envs)
	const n = 4
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := user.GlobalSessions(ctx, alice)
			errs <- err
		}()
	}
	// Every listing parked in UserSessions's own select, waiting for the
	// shared one (were they not shared, their look-ups would be held
	// above): one merely inside UserSessions may not have joined yet and
	// would make a look-up of its own after the release.
	if !stacks.WaitParked(n, "[select", "global.(*Service).UserSessions(") {
		t.Fatal("the listings did not all start")
	}
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := takeCalls(envs)[envs[2].urls[0]+federation.LookupPath]; got != 1 {
		t.Errorf("look-ups at pod2 for %d listings of %s at once: %d, want 1", n, alice, got)
	}
}
