package http_test

import (
	"context"
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
)

// directoryPass runs a directory pass on every pod of envs (R-G1).
func directoryPass(t *testing.T, envs []*env) {
	t.Helper()
	for i, e := range envs {
		if err := e.srvs[0].Federation.DirectoryPass(t.Context()); err != nil {
			t.Fatalf("pod%d's directory pass: %v", i, err)
		}
	}
}

// sessionCalls is the pods asked for sessions in calls (by pod index).
func sessionCalls(envs []*env, calls map[string]int) []int {
	var out []int
	for i, e := range envs {
		if calls[e.urls[0]+federation.SessionsPath] > 0 {
			out = append(out, i)
		}
	}
	return out
}

// takeCalls returns every pod's pod-to-pod calls since the last take.
func takeCalls(envs []*env) map[string]int {
	all := map[string]int{}
	for _, e := range envs {
		for k, n := range e.calls.take() {
			all[k] += n
		}
	}
	return all
}

// userOf returns a user name with prefix whose directory pod is pod.
func userOf(doc *vdibroker.Federation, prefix, pod string) string {
	for i := 0; ; i++ {
		if u := fmt.Sprintf("%s%d", prefix, i); federation.DirectoryPod(doc, u) == pod {
			return u
		}
	}
}

// TestSessionDirectory_RG1: with five pods, a global connect asks the
// user's directory pod where their sessions are, and then only the pods
// it names or cannot vouch for:
//   - a session made by a pool connect (not a global one) is found once
//     its pod's directory pass registered it, and no other pod is asked;
//   - a session a global connect makes is registered before it is
//     answered, by the look-up itself (PodLookupRequest.Register), so
//     the placing pod makes no registration call: the next connect,
//     through any pod, reconnects to it at once;
//   - a pod whose whole list at the document's generation has not
//     arrived is asked itself;
//   - without an answer from the directory pod, every pod is asked.
func TestSessionDirectory_RG1(t *testing.T) {
	envs := fedPods(t, 5, 1, 20, vdibroker.DistributionNone)
	ctx := t.Context()
	// (A pod's status caches its peers' load summaries, which say they
	// are behind until their passes: pod4's, which asks nobody below.)
	st, err := envs[4].admin.GetFederation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc := st.Document
	if !st.Directory.Behind {
		t.Fatal("before any directory pass, pod4's status says its sessions are at their directory pods")
	}
	directoryPass(t, envs)
	for i, e := range envs {
		if st, err := e.admin.GetFederation(ctx); err != nil || st.Directory.Behind || st.Directory.LastFull == nil {
			t.Fatalf("pod%d after its pass: %+v %v; want not behind", i, st.Directory, err)
		}
	}
	take := func() map[string]int { return takeCalls(envs) }

	// alice's directory pod is pod2; her session is made on pod3 by a
	// pool connect.
	alice := userOf(doc, "alice", "pod2")
	id := envs[3].mustConnect("office-pod3", alice).SessionID
	directoryPass(t, envs)
	take()
	a, err := envs[0].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: alice})
	if err != nil || !a.Reconnect || a.Pod != "pod3" || a.SessionID != id {
		t.Fatalf("alice through pod0: %+v %v; want a reconnect to %s on pod3", a, err, id)
	}
	calls := take()
	if got := sessionCalls(envs, calls); len(got) != 1 || got[0] != 3 {
		t.Errorf("pods asked for alice's sessions: %v; want pod3 alone (the directory named it)", got)
	}
	if calls[envs[2].urls[0]+federation.LookupPath] != 1 {
		t.Errorf("calls %v: want one look-up at pod2, alice's directory pod", calls)
	}

	// bob (directory pod pod4) connects through pod1: nobody has a
	// session of his, so no pod is asked; None places him on pod1, and
	// pod4 registered him there in the look-up, before pod1 placed him:
	// pod1 makes no registration call. Through pod3 next, he reconnects
	// to it, pod1 alone asked.
	bob := userOf(doc, "bob", "pod4")
	a, err = envs[1].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: bob})
	if err != nil || !a.Created || a.Pod != "pod1" {
		t.Fatalf("bob through pod1: %+v %v; want a new session on pod1", a, err)
	}
	calls = take()
	if got := sessionCalls(envs, calls); len(got) != 0 {
		t.Errorf("pods asked for bob's sessions (he has none): %v; want none", got)
	}
	if calls[envs[4].urls[0]+federation.LookupPath] != 1 || calls[envs[4].urls[0]+federation.DirectoryPath] != 0 {
		t.Errorf("calls %v: want bob's look-up at pod4, and no registration call (the look-up registered him)", calls)
	}
	// Nor does pod1's next directory pass register him again.
	if err := envs[1].srvs[0].Federation.DirectoryPass(ctx); err != nil {
		t.Fatal(err)
	}
	if calls = take(); calls[envs[4].urls[0]+federation.DirectoryPath] != 0 {
		t.Errorf("calls %v: pod1's directory pass registered bob at pod4 again", calls)
	}
	b, err := envs[3].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: bob})
	if err != nil || !b.Reconnect || b.SessionID != a.SessionID {
		t.Fatalf("bob through pod3 at once: %+v %v; want a reconnect to %s on pod1", b, err, a.SessionID)
	}
	if got := sessionCalls(envs, take()); len(got) != 1 || got[0] != 1 {
		t.Errorf("pods asked for bob's sessions the second time: %v; want pod1 alone", got)
	}

	// A new generation of the document, whose whole list pod2 has not
	// sent: pod2 is asked, the others (which sent theirs) are not.
	doc2 := *doc
	doc2.Generation++
	for _, e := range envs {
		if _, err := e.admin.PutFederation(ctx, &doc2); err != nil {
			t.Fatal(err)
		}
	}
	for i, e := range envs {
		if i != 2 {
			if err := e.srvs[0].Federation.DirectoryPass(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	carol := userOf(&doc2, "carol", "pod0")
	take()
	if _, err := envs[0].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: carol, DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if got := sessionCalls(envs, take()); len(got) != 1 || got[0] != 2 {
		t.Errorf("pods asked with pod2's whole list missing: %v; want pod2 alone", got)
	}
	// The same for a connect that makes a session: its plan, made before
	// the look-up, asked pod2 already (its summary says it is behind),
	// which the look-up's answer does not make it ask again.
	frank := userOf(&doc2, "frank", "pod3")
	if _, err := envs[0].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: frank}); err != nil {
		t.Fatal(err)
	}
	calls = take()
	if got := sessionCalls(envs, calls); len(got) != 1 || got[0] != 2 || calls[envs[2].urls[0]+federation.SessionsPath] != 1 {
		t.Errorf("pods asked for frank's sessions with pod2's whole list missing: %v, calls %v; want pod2 alone, once", got, calls)
	}
	// Unless the directory holds an entry of the user at a pod that
	// answered none (a session it may have made since it was asked):
	// then it is asked again. grace's entry at pod2 (registered, no
	// session made).
	grace := userOf(&doc2, "grace", "pod3")
	pod3 := vdibroker.Pod{Name: "pod3", URL: envs[3].urls[0]}
	if err := vhttp.NewPodClient("pod2", []byte(testFedSecret)).Register(ctx, pod3, vdibroker.PodDirectoryRequest{Generation: doc2.Generation, Users: []string{grace}}); err != nil {
		t.Fatal(err)
	}
	take()
	if _, err := envs[0].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: grace}); err != nil {
		t.Fatal(err)
	}
	calls = take()
	if got := calls[envs[2].urls[0]+federation.SessionsPath]; got != 2 {
		t.Errorf("pod2 asked %d times for grace's sessions (behind, then named by her entry), calls %v; want 2", got, calls)
	}

	// erin's directory pod, pod4, stops answering: pod0 asks every other
	// pod, and skips pod4, which did not answer its look-up, as
	// unavailable (R-G5).
	erin := userOf(&doc2, "erin", "pod4")
	envs[4].down()
	a, err = envs[0].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: erin, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := sessionCalls(envs, take()); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("pods asked without erin's directory pod: %v; want pod1, pod2 and pod3", got)
	}
	if !slices.ContainsFunc(a.Decision.Pods, func(p vdibroker.PodDecision) bool { return p.Pod == "pod4" && p.Skipped != "" }) {
		t.Errorf("the decision does not say pod4 was skipped: %+v", a.Decision.Pods)
	}
}

// TestLookupRegistersWithOlderPods_RG1_RG5: a look-up's registration
// (PodLookupRequest.Register) with pods of the version before it, which
// refuse the field they do not know (400 naming it) before doing
// anything, as every version decodes bodies strictly:
//   - pod4, an older directory pod, is asked again without it, and the
//     placing pod registers the session itself: bob's next connect
//     through another pod reconnects to it;
//   - pod1, an older member pod, is asked to connect again without
//     "registeredAt", and places dave (registering him itself, again).
func TestLookupRegistersWithOlderPods_RG1_RG5(t *testing.T) {
	var lookups, connects atomic.Int32
	envs := fedPodsWith(t, 5, 1, 1, vdibroker.DistributionNone, false, func(i int, h nethttp.Handler) nethttp.Handler {
		switch i {
		case 4:
			return olderPodCall(h, federation.LookupPath, func() any {
				return &struct {
					User string `json:"user"`
				}{}
			}, &lookups)
		case 1:
			return olderPodCall(h, federation.ConnectPath, func() any {
				return &struct {
					GlobalEntitlement string `json:"globalEntitlement"`
					HostPool          string `json:"hostPool"`
					User              string `json:"user"`
					DryRun            bool   `json:"dryRun,omitempty"`
					Application       string `json:"application,omitempty"`
					Existing          bool   `json:"existing,omitempty"`
					SessionID         string `json:"sessionId,omitempty"`
				}{}
			}, &connects)
		}
		return h
	})
	ctx := t.Context()
	st, err := envs[0].admin.GetFederation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc := st.Document
	directoryPass(t, envs)
	takeCalls(envs)

	bob := userOf(doc, "bob", "pod4")
	a, err := envs[2].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: bob})
	if err != nil || !a.Created || a.Pod != "pod2" {
		t.Fatalf("bob through pod2: %+v %v; want a new session on pod2", a, err)
	}
	calls := takeCalls(envs)
	if n := lookups.Load(); n != 1 || calls[envs[4].urls[0]+federation.LookupPath] != 2 {
		t.Errorf("pod4 refused %d look-ups naming a pod to register (want 1), calls %v (want two look-ups: again without)", n, calls)
	}
	if got := sessionCalls(envs, calls); len(got) != 0 || calls[envs[4].urls[0]+federation.DirectoryPath] != 1 {
		t.Errorf("calls %v (pods asked for sessions %v): want pod2's registration of bob at pod4, no pod asked", calls, got)
	}
	b, err := envs[3].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: bob})
	if err != nil || !b.Reconnect || b.SessionID != a.SessionID {
		t.Fatalf("bob through pod3: %+v %v; want a reconnect to %s on pod2", b, err, a.SessionID)
	}

	// pod0's one place taken: dave, through pod0, is placed on pod1 (its
	// site's other pod), which his directory pod registered him at.
	envs[0].mustConnect("office-pod0", "filler")
	dave := userOf(doc, "dave", "pod3")
	takeCalls(envs)
	a, err = envs[0].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: dave})
	if err != nil || !a.Created || a.Pod != "pod1" {
		t.Fatalf("dave through pod0: %+v %v; want a new session on older pod1", a, err)
	}
	calls = takeCalls(envs)
	if n := connects.Load(); n != 1 || calls[envs[3].urls[0]+federation.DirectoryPath] != 1 {
		t.Errorf("pod1 refused %d connects saying registered (want 1, then asked without, and registering dave itself), calls %v", n, calls)
	}
	b, err = envs[2].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: dave})
	if err != nil || !b.Reconnect || b.SessionID != a.SessionID {
		t.Fatalf("dave through pod2: %+v %v; want a reconnect to %s on pod1", b, err, a.SessionID)
	}
}

// TestLookupRegisteredOtherGeneration_RG1: a look-up's registration
// (PodLookupRequest.Register) is at the user's directory pod in the
// documents of the connecting pod and of the directory pod; the placing
// pod, while federation apply is on its way, may hold another
// generation, whose directory pod for the user is another pod, where
// its whole list already vouches for it. It then registers the session
// there itself before the connect is answered, as without the look-up's:
// the user's next connect, through a pod of its generation, reconnects.
//
// Six pods at generation 1; generation 2 removes pod5 (the user's
// directory pod at 1), applied to pod1..pod4 only: pod0 (full) places
// the user on pod1, after pod5 registered him there.
func TestLookupRegisteredOtherGeneration_RG1(t *testing.T) {
	envs := fedPods(t, 6, 1, 1, vdibroker.DistributionNone)
	ctx := t.Context()
	st, err := envs[0].admin.GetFederation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc := st.Document
	directoryPass(t, envs)
	doc2 := withoutPod(doc, "pod5")
	for _, e := range envs[1:5] {
		if _, err := e.admin.PutFederation(ctx, &doc2); err != nil {
			t.Fatal(err)
		}
		if err := e.srvs[0].Federation.DirectoryPass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	user := ""
	for i := 0; user == ""; i++ {
		if u := fmt.Sprintf("fred%d", i); federation.DirectoryPod(doc, u) == "pod5" && federation.DirectoryPod(&doc2, u) != "pod0" {
			user = u
		}
	}
	envs[0].mustConnect("office-pod0", "filler")
	takeCalls(envs)
	a, err := envs[0].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: user})
	if err != nil || !a.Created || a.Pod != "pod1" {
		t.Fatalf("%s through pod0: %+v %v; want a new session on pod1", user, a, err)
	}
	if calls := takeCalls(envs); calls[envs[5].urls[0]+federation.LookupPath] != 1 {
		t.Fatalf("calls %v: want %s's look-up at pod5, his directory pod at generation 1", calls, user)
	}
	b, err := envs[2].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: user})
	if err != nil || !b.Reconnect || b.SessionID != a.SessionID {
		t.Fatalf("%s through pod2 (generation 2) at once: %+v %v; want a reconnect to %s on pod1", user, b, err, a.SessionID)
	}
}

// TestLookupRegister_RG1: what a look-up naming a pod to register
// (PodLookupRequest.Register) does at the user's directory pod, asked by
// a holder of the federation secret: a pod the document does not list
// is InvalidArgument naming register; the user is registered there only
// when the answer names no pod (a user with an entry keeps only it), and
// only at the user's directory pod (another pod answers and registers
// nothing, as PodRegister refuses such a user).
func TestLookupRegister_RG1(t *testing.T) {
	envs := fedPods(t, 5, 1, 5, vdibroker.DistributionNone)
	ctx := t.Context()
	st, err := envs[0].admin.GetFederation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := vhttp.NewPodClient("pod1", []byte(testFedSecret))
	pod0 := vdibroker.Pod{Name: "pod0", URL: envs[0].urls[0]}
	lookup := func(user, register string) *vdibroker.PodLookup {
		t.Helper()
		l, err := c.Lookup(ctx, pod0, vdibroker.PodLookupRequest{User: user, Register: register})
		if err != nil {
			t.Fatalf("look-up of %s registering at %q: %v", user, register, err)
		}
		return l
	}
	victim := userOf(st.Document, "victim", "pod0")
	_, err = c.Lookup(ctx, pod0, vdibroker.PodLookupRequest{User: victim, Register: "stranger"})
	if vdibroker.ErrorCode(err) != vdibroker.EInvalid || vdibroker.ErrorField(err) != "register" {
		t.Errorf("a look-up registering at a pod not in the document: %v; want InvalidArgument naming register", err)
	}
	if l := lookup(victim, ""); len(l.Pods) != 0 || l.Registered {
		t.Fatalf("victim after the refused look-up: %+v; want no entry", l)
	}
	if l := lookup(victim, "pod3"); !l.Registered || len(l.Pods) != 0 {
		t.Errorf("victim's look-up registering at pod3: %+v; want registered, no pod named", l)
	}
	if l := lookup(strings.ToUpper(victim), "pod2"); l.Registered || !slices.Equal(l.Pods, []string{"pod3"}) {
		t.Errorf("victim's look-up registering at pod2 with pod3's entry: %+v; want pod3 named and nothing registered", l)
	}
	if l := lookup(victim, ""); !slices.Equal(l.Pods, []string{"pod3"}) {
		t.Errorf("victim's entries: %+v; want pod3's alone", l)
	}
	other := userOf(st.Document, "other", "pod1")
	if l := lookup(other, "pod3"); l.Registered {
		t.Errorf("a look-up at pod0 of a user whose directory pod is pod1 registered: %+v", l)
	}
	if l := lookup(other, ""); len(l.Pods) != 0 {
		t.Errorf("pod0's entries of a user it is not the directory pod of: %+v; want none", l)
	}
}

// TestPodRegisterAsAnAttacker_RG1: what a holder of the federation secret
// can make a pod's directory do. A call registers under the name it is
// signed with, never a name in its body (the secret is shared, so its
// holder can sign as any listed pod: docs/federation.md, "Limits"); a
// pod the document does not list is refused; a call's users are
// bounded; a replayed whole list is refused; a call on this pod's
// generation naming a user whose directory pod is another is refused
// whole (TestPodRegisterOnlyItsUsers_RG1).
func TestPodRegisterAsAnAttacker_RG1(t *testing.T) {
	envs := fedPods(t, 5, 1, 5, vdibroker.DistributionNone)
	secret := []byte(testFedSecret)
	url := envs[0].urls[0]
	now := time.Now()
	st, err := envs[0].admin.GetFederation(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	victim := userOf(st.Document, "victim", "pod0")
	body := fmt.Sprintf(`{"generation":1,"users":[%q],"full":true,"last":true}`, victim)
	if got := podCallStatus(t, url, "POST", federation.DirectoryPath, body, signedBy("stranger", secret, "POST", federation.DirectoryPath, body, now)); got != nethttp.StatusForbidden {
		t.Errorf("a pod not in the document registers: %d, want 403", got)
	}
	h := signedBy("pod3", secret, "POST", federation.DirectoryPath, body, now)
	if got := podCallStatus(t, url, "POST", federation.DirectoryPath, body, h); got != nethttp.StatusNoContent {
		t.Fatalf("pod3 registers: %d, want 204", got)
	}
	if got := podCallStatus(t, url, "POST", federation.DirectoryPath, body, h); got != nethttp.StatusUnauthorized {
		t.Errorf("the same call again: %d, want 401 (a replay)", got)
	}
	c := vhttp.NewPodClient("pod1", secret)
	pod0 := vdibroker.Pod{Name: "pod0", URL: url}
	l, err := c.Lookup(t.Context(), pod0, vdibroker.PodLookupRequest{User: strings.ToUpper(victim)})
	if err != nil || len(l.Pods) != 1 || l.Pods[0] != "pod3" || l.Complete["pod3"] != 1 {
		t.Fatalf("victim's look-up: %+v %v; want pod3 (the signer, not the body's word), complete at 1", l, err)
	}
	many := make([]string, vdibroker.MaxDirectoryUsers+1)
	for i := range many {
		many[i] = fmt.Sprintf("u%d", i)
	}
	u1 := userOf(st.Document, "u", "pod0")
	err = c.Register(t.Context(), pod0, vdibroker.PodDirectoryRequest{Generation: 1, Users: many})
	if vdibroker.ErrorCode(err) != vdibroker.EInvalid || vdibroker.ErrorField(err) != "users" {
		t.Errorf("%d users in one call: %v; want InvalidArgument naming users", len(many), err)
	}
	err = c.Register(t.Context(), pod0, vdibroker.PodDirectoryRequest{Generation: 1, Users: []string{"bad\x00name"}})
	if vdibroker.ErrorCode(err) != vdibroker.EInvalid || !strings.HasPrefix(vdibroker.ErrorField(err), "users[0]") {
		t.Errorf("a bad user name: %v; want InvalidArgument naming users[0]", err)
	}
	err = c.Register(t.Context(), pod0, vdibroker.PodDirectoryRequest{Generation: 1, Users: []string{u1}, Last: true})
	if vdibroker.ErrorCode(err) != vdibroker.EInvalid || vdibroker.ErrorField(err) != "last" {
		t.Errorf("last without full: %v; want InvalidArgument naming last", err)
	}
	if l, err := c.Lookup(context.Background(), pod0, vdibroker.PodLookupRequest{User: u1}); err != nil || len(l.Pods) != 0 {
		t.Errorf("%s after the refused calls: %+v %v; want no pod", u1, l, err)
	}
}

// TestPodRegisterOnlyItsUsers_RG1: a pod takes, from a caller on its own
// generation of the document, only the users it is the directory pod of
// (federation.DirectoryPod, by which an honest caller picks it): a call
// naming another user is refused whole (400 naming that user's index,
// nothing written), so a holder of the secret signing as a listed pod
// cannot fill a pod with entries no look-up asks for. A caller on
// another generation (federation apply on its way: its document, and so
// its users' directory pods, differ) is taken as it is. The honest
// directory passes of every pod are taken (no pod behind).
func TestPodRegisterOnlyItsUsers_RG1(t *testing.T) {
	envs := fedPods(t, 5, 1, 5, vdibroker.DistributionNone)
	st, err := envs[0].admin.GetFederation(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	doc := st.Document
	mine, other := userOf(doc, "mine", "pod0"), userOf(doc, "other", "pod2")
	c := vhttp.NewPodClient("pod1", []byte(testFedSecret))
	pod0 := vdibroker.Pod{Name: "pod0", URL: envs[0].urls[0]}
	look := func(u string) []string {
		t.Helper()
		l, err := c.Lookup(t.Context(), pod0, vdibroker.PodLookupRequest{User: u})
		if err != nil {
			t.Fatal(err)
		}
		return l.Pods
	}
	for _, tc := range []struct {
		name  string
		req   vdibroker.PodDirectoryRequest
		field string
	}{
		{"another pod's user", vdibroker.PodDirectoryRequest{Generation: doc.Generation, Users: []string{other}}, "users[0]"},
		{"its user, then another pod's", vdibroker.PodDirectoryRequest{Generation: doc.Generation, Users: []string{mine, strings.ToUpper(other)}}, "users[1]"},
		{"in a whole list", vdibroker.PodDirectoryRequest{Generation: doc.Generation, Users: []string{mine, other}, Full: true, Last: true}, "users[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Register(t.Context(), pod0, tc.req)
			if vdibroker.ErrorCode(err) != vdibroker.EInvalid || vdibroker.ErrorField(err) != tc.field || !strings.Contains(vdibroker.ErrorMessage(err), "directory pod") {
				t.Errorf("got %v; want InvalidArgument naming %s", err, tc.field)
			}
			if got := look(mine); len(got) != 0 {
				t.Errorf("%s after the refused call: at %v; want nowhere (nothing written)", mine, got)
			}
		})
	}
	// On another generation, both are taken.
	if err := c.Register(t.Context(), pod0, vdibroker.PodDirectoryRequest{Generation: doc.Generation + 1, Users: []string{mine, other}}); err != nil {
		t.Fatalf("a caller on the next generation: %v", err)
	}
	for _, u := range []string{mine, other} {
		if got := look(u); !slices.Equal(got, []string{"pod1"}) {
			t.Errorf("%s after the next generation's call: at %v; want pod1", u, got)
		}
	}
	// The pods' own passes, with sessions whose users' directory pods
	// are every pod, are all taken.
	for i, e := range envs {
		for j := range 5 {
			e.mustConnect(fmt.Sprintf("office-pod%d", i), userOf(doc, fmt.Sprintf("p%du", i), fmt.Sprintf("pod%d", j)))
		}
	}
	directoryPass(t, envs)
	for i, e := range envs {
		if st, err := e.admin.GetFederation(t.Context()); err != nil || st.Directory.Behind {
			t.Errorf("pod%d after its pass: %+v %v; want not behind", i, st.Directory, err)
		}
	}
}

// TestSessionDirectoryMixedGenerations_RG1: a pod on a newer generation
// registers its new sessions at their directory pods by its own document;
// a pod still on the older one (federation apply had not reached it) asks
// the user's directory pod by the older, which still holds a whole list
// of that pod at the older generation and so vouches for it. The pod is
// asked itself: its load summary says it is on another generation.
func TestSessionDirectoryMixedGenerations_RG1(t *testing.T) {
	envs := fedPods(t, 6, 1, 20, vdibroker.DistributionNone)
	ctx := t.Context()
	st, err := envs[1].admin.GetFederation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc := st.Document
	directoryPass(t, envs)

	// Generation 2 drops pod5, the directory pod of ursula at 1; pod0
	// stays on 1.
	dropPod5(t, envs, doc)

	ursula := userOf(doc, "ursula", "pod5")
	a, err := envs[1].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: ursula})
	if err != nil || !a.Created || a.Pod != "pod1" {
		t.Fatalf("ursula through pod1 (generation 2): %+v %v; want a new session on pod1", a, err)
	}
	b, err := envs[0].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: ursula})
	if err != nil || !b.Reconnect || b.SessionID != a.SessionID {
		t.Fatalf("ursula through pod0 (generation 1): %+v %v; want a reconnect to %s on pod1, not a second session", b, err, a.SessionID)
	}
}

// TestSessionDirectoryOlderPod_RG1: a pod of an older version, without
// the directory's calls (its router answers 404), keeps the others from
// nothing: their registrations there are not failures (a pod that cannot
// be asked holds nothing anyone relies on), so they are not behind and
// are not asked for sessions; the users whose directory pod it is are
// looked for in every pod, as before.
func TestSessionDirectoryOlderPod_RG1(t *testing.T) {
	older := func(i int, h nethttp.Handler) nethttp.Handler {
		if i != 4 {
			return h
		}
		return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			if strings.HasPrefix(r.URL.Path, federation.DirectoryPath) {
				nethttp.NotFound(w, r)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	envs := fedPodsWith(t, 5, 1, 20, vdibroker.DistributionNone, false, older)
	ctx := t.Context()
	directoryPass(t, envs)
	for i, e := range envs[:4] {
		if st, err := e.admin.GetFederation(ctx); err != nil || st.Directory.Behind {
			t.Fatalf("pod%d after its pass: %+v %v; want not behind (the older pod4 keeps no directory)", i, st.Directory, err)
		}
	}
	st, err := envs[0].admin.GetFederation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	take := func() map[string]int { return takeCalls(envs) }
	// frank's directory pod is pod2: nobody is asked. gina's is pod4,
	// which cannot answer: every pod is.
	frank, gina := userOf(st.Document, "frank", "pod2"), userOf(st.Document, "gina", "pod4")
	take()
	if _, err := envs[0].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: frank, DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if got := sessionCalls(envs, take()); len(got) != 0 {
		t.Errorf("pods asked for frank's sessions: %v; want none", got)
	}
	if _, err := envs[0].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: gina, DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if got := sessionCalls(envs, take()); !slices.Equal(got, []int{1, 2, 3, 4}) {
		t.Errorf("pods asked for gina's sessions: %v; want pod1 to pod4", got)
	}
}

// TestGlobalConnectCountsPlacementsWithTheDirectory_RG2: with the session
// directory, a global connect reads the peers it need not ask for
// sessions from their cached load summaries alone, and each session it
// places on a peer is counted there before the next decision: eight
// users connecting one after another through pod0 alternate between
// pod0 and pod1, the two equal pods of its site (4 and 4), and no pod is
// asked for sessions. A cache that missed the placements on pod1 would
// keep it the least loaded and put 7 of them there.
func TestGlobalConnectCountsPlacementsWithTheDirectory_RG2(t *testing.T) {
	envs := fedPods(t, 5, 4, 10, vdibroker.DistributionSessionCount)
	directoryPass(t, envs)
	takeCalls(envs)
	perPod := map[string]int{}
	for i := range 8 {
		a, err := envs[0].admin.GlobalConnect(t.Context(), "office", vdibroker.GlobalConnectRequest{User: fmt.Sprintf("alt%d", i)})
		if err != nil || !a.Created {
			t.Fatalf("alt%d: %+v %v", i, a, err)
		}
		perPod[a.Pod]++
	}
	if perPod["pod0"] != 4 || perPod["pod1"] != 4 {
		t.Errorf("sessions per pod %v; want 4 on pod0 and 4 on pod1 (each placement counted before the next decision)", perPod)
	}
	if got := sessionCalls(envs, takeCalls(envs)); len(got) != 0 {
		t.Errorf("pods asked for sessions: %v; want none (nobody had one, and every pod's whole list was through)", got)
	}
}

// TestGlobalConnectRereadsExpiredPeerLoads_RG2: a global connect reads a
// peer's cached load summary without a call only while it is fresh; once
// the load TTL has passed, the summary is asked again and sessions made
// on the peer meanwhile count. With the session directory nearly every
// peer is read from the cache: one whose summary never expired there
// would look as loaded as it did at the first connect for good. pod0
// sees pod1 empty at its first connect; pod1 then takes three sessions
// by its pool connect; within the TTL pod0 still places on pod1 (the
// cache), after it on itself (pod1: 3, pod0: 1), having asked pod1.
func TestGlobalConnectRereadsExpiredPeerLoads_RG2(t *testing.T) {
	envs := fedPods(t, 5, 4, 10, vdibroker.DistributionSessionCount)
	envs[0].clock.Freeze() // pod0's load TTL runs by this test's steps alone
	directoryPass(t, envs)
	ctx := t.Context()
	a, err := envs[0].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: "early"})
	if err != nil || !a.Created || a.Pod != "pod0" {
		t.Fatalf("early through pod0: %+v %v; want a new session on pod0 (a tie, the connected pod)", a, err)
	}
	for i := range 3 {
		envs[1].mustConnect("office-pod1", fmt.Sprintf("direct%d", i))
	}
	takeCalls(envs)
	a, err = envs[0].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: "late", DryRun: true})
	if err != nil || a.Pod != "pod1" {
		t.Fatalf("late through pod0 within the load TTL: %+v %v; want pod1 (its cached summary: empty)", a, err)
	}
	if n := takeCalls(envs)[envs[1].urls[0]+federation.LoadsPath]; n != 0 {
		t.Errorf("pod1 asked for its loads %d times within the load TTL; want none", n)
	}
	envs[0].clock.Advance(4 * time.Second) // past the load TTL, 3 s
	a, err = envs[0].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: "late"})
	if err != nil || !a.Created || a.Pod != "pod0" {
		t.Fatalf("late through pod0 after the load TTL: %+v %v; want a new session on pod0 (pod1 has 3 sessions, pod0 1)", a, err)
	}
	if n := takeCalls(envs)[envs[1].urls[0]+federation.LoadsPath]; n != 1 {
		t.Errorf("pod1 asked for its loads %d times after the load TTL; want once", n)
	}
}

// TestSessionDirectoryCachedPeerOfAnotherGeneration_RG1: a peer whose
// load summary, fresh in the cache, says it is on another generation of
// the document is still asked for the user's sessions, as when the
// summary is read by a call (TestSessionDirectoryMixedGenerations_RG1):
// pod0, on generation 1, has pod1's generation-2 summary cached by an
// earlier connect when ursula, who has a session on pod1 that her
// generation-1 directory pod cannot know, connects through it.
func TestSessionDirectoryCachedPeerOfAnotherGeneration_RG1(t *testing.T) {
	envs := fedPods(t, 6, 1, 20, vdibroker.DistributionNone)
	envs[0].clock.Freeze() // pod0's cached summaries stay fresh through the test
	ctx := t.Context()
	st, err := envs[1].admin.GetFederation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc := st.Document
	directoryPass(t, envs)
	dropPod5(t, envs, doc)
	if _, err := envs[0].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: "primer", DryRun: true}); err != nil {
		t.Fatal(err)
	}
	ursula := userOf(doc, "ursula", "pod5")
	a, err := envs[1].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: ursula})
	if err != nil || !a.Created || a.Pod != "pod1" {
		t.Fatalf("ursula through pod1 (generation 2): %+v %v; want a new session on pod1", a, err)
	}
	takeCalls(envs)
	b, err := envs[0].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: ursula})
	if err != nil || !b.Reconnect || b.SessionID != a.SessionID {
		t.Fatalf("ursula through pod0 (generation 1, pod1's summary cached): %+v %v; want a reconnect to %s on pod1, not a second session", b, err, a.SessionID)
	}
	if n := takeCalls(envs)[envs[1].urls[0]+federation.LoadsPath]; n != 0 {
		t.Errorf("pod1 asked for its loads %d times; want none (its summary was cached)", n)
	}
}

// withoutPod is doc's next generation without pod and its member pool.
func withoutPod(doc *vdibroker.Federation, pod string) vdibroker.Federation {
	next := *doc
	next.Generation++
	next.Pods = slices.DeleteFunc(slices.Clone(doc.Pods), func(p vdibroker.Pod) bool { return p.Name == pod })
	ge := doc.GlobalEntitlements[0]
	ge.Members = slices.DeleteFunc(slices.Clone(ge.Members), func(m vdibroker.Member) bool { return m.Pod == pod })
	next.GlobalEntitlements = []vdibroker.GlobalEntitlement{ge}
	return next
}

// dropPod5 puts generation doc+1, without pod5 and its member pool, on
// pods 1 to 4 (pod0 stays on doc's) and runs their directory passes.
func dropPod5(t *testing.T, envs []*env, doc *vdibroker.Federation) {
	t.Helper()
	doc2 := withoutPod(doc, "pod5")
	for _, e := range envs[1:5] {
		if _, err := e.admin.PutFederation(t.Context(), &doc2); err != nil {
			t.Fatal(err)
		}
	}
	directoryPass(t, envs[1:5])
}

// TestLookupAfterDocumentChangedMidConnect_RG1: a global connect plans
// the new session's pod by the document it read when it began; if
// federation apply removes that pod from this pod's document before the
// look-up, and this pod is the user's directory pod, its own look-up
// refuses to register there (register names a pod not in its document).
// It is looked up again without: the directory still answers, so no pod
// is asked for the user's sessions, as every pod was when the refusal
// was taken for a directory that did not answer.
func TestLookupAfterDocumentChangedMidConnect_RG1(t *testing.T) {
	var armed atomic.Bool
	var changed atomic.Int32
	var envs []*env
	var doc2 vdibroker.Federation
	envs = fedPodsWith(t, 5, 1, 1, vdibroker.DistributionNone, false, func(i int, h nethttp.Handler) nethttp.Handler {
		if i != 2 {
			return h
		}
		return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			// pod0's plan asks pod2 for its loads: pod1 (the pod
			// planned, pod0 being full) leaves pod0's document then.
			if r.URL.Path == federation.LoadsPath && armed.CompareAndSwap(true, false) {
				if _, err := envs[0].admin.PutFederation(r.Context(), &doc2); err != nil {
					t.Errorf("the new document at pod0: %v", err)
				}
				changed.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
	ctx := t.Context()
	st, err := envs[0].admin.GetFederation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	doc := st.Document
	directoryPass(t, envs)
	doc2 = withoutPod(doc, "pod1")

	envs[0].mustConnect("office-pod0", "filler")
	user := userOf(doc, "erin", "pod0")
	// pod0's cached loads of its peers go stale (the load TTL, not the
	// whole lists' freshness), so its plan asks them.
	envs[0].clock.Advance(time.Minute)
	takeCalls(envs)
	armed.Store(true)
	a, err := envs[0].admin.GlobalConnect(ctx, "office", vdibroker.GlobalConnectRequest{User: user})
	if changed.Load() != 1 {
		t.Fatalf("pod0's connect did not ask pod2 for its loads (the document was not changed mid-connect): %+v %v", a, err)
	}
	if err != nil || !a.Created || a.Pod != "pod1" {
		t.Fatalf("%s through pod0: %+v %v; want a new session on pod1, planned by the document the connect began with", user, a, err)
	}
	if got := sessionCalls(envs, takeCalls(envs)); len(got) != 0 {
		t.Errorf("pods asked for %s's sessions: %v; want none (her directory pod, pod0, answered)", user, got)
	}
}
