package http_test

import (
	"slices"
	"testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
)

// TestGlobalApplicationSkipsPoolsThatCannotRunIt_RE12_RE9: a global
// application entitlement's connect treats a member pool whose hosts
// cannot run RemoteApps as one that does not take the session and tries
// the next, in this pod or another (the pod-to-pod connect carries the
// code); when no member pool can, the answer is RemoteAppUnsupported.
func TestGlobalApplicationSkipsPoolsThatCannotRunIt_RE12_RE9(t *testing.T) {
	envs := fedPods(t, 2, 1, 5, vdibroker.DistributionNone)
	st, err := envs[0].admin.GetFederation(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	doc := *st.Document
	doc.Generation++
	doc.GlobalEntitlements = append(slices.Clone(doc.GlobalEntitlements), vdibroker.GlobalEntitlement{
		Name: "crm", Kind: vdibroker.KindApplication, Application: "paint",
		Members: []vdibroker.Member{{Pod: "pod0", HostPool: "office-pod0"}, {Pod: "pod1", HostPool: "office-pod1"}}})
	for i, e := range envs {
		d := doc
		if _, err := e.admin.PutFederation(t.Context(), &d); err != nil {
			t.Fatal(err)
		}
		pod := []string{"pod0", "pod1"}[i]
		e.appGroup("office-"+pod+"-apps", "office-"+pod, "paint")
	}
	// pod0 (the connected pod, tried first) has an xrdp host; pod1 a
	// Windows one.
	envs[0].sayRemoteApps("pod0-h001", false)
	envs[1].sayRemoteApps("pod1-h001", true)

	a, err := envs[0].admin.GlobalConnect(t.Context(), "crm", vdibroker.GlobalConnectRequest{User: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Pod != "pod1" || a.HostPool != "office-pod1" {
		t.Fatalf("placed in %s/%s, want pod1/office-pod1", a.Pod, a.HostPool)
	}
	var skipped string
	for _, p := range a.Decision.Pods {
		for _, pl := range p.Pools {
			if pl.HostPool == "office-pod0" {
				skipped = pl.Skipped
			}
		}
	}
	if skipped != federation.SkipRemoteAppUnsupported {
		t.Errorf("office-pod0 skipped as %q, want %q", skipped, federation.SkipRemoteAppUnsupported)
	}

	// Now pod1's host cannot either: refused as unsupported, not as no
	// capacity, and the refusal came from pod1 over the pod-to-pod call.
	envs[1].sayRemoteApps("pod1-h001", false)
	_, err = envs[0].admin.GlobalConnect(t.Context(), "crm", vdibroker.GlobalConnectRequest{User: "bob"})
	wantCode(t, err, vdibroker.ERemoteAppUnsupported, `"crm"`, "pod1 (s0): "+federation.SkipRemoteAppUnsupported)
}

// TestFeedGlobalApplicationUnavailable_RE12_RE9_RU5: a global
// application entitlement is unavailable in a pod's feed when every
// member pool its connect there tries is that pod's and none of their
// hosts can run RemoteApps (a WithinPod scope, or members of that pod
// only); one with a member pool of another pod in its scope stays
// available, whatever that pod's hosts say (even one named as a pool of
// this pod): the feed does not ask other pods. A global desktop
// entitlement over the same pools stays available.
func TestFeedGlobalApplicationUnavailable_RE12_RE9_RU5(t *testing.T) {
	envs := fedPods(t, 2, 1, 5, vdibroker.DistributionNone)
	st, err := envs[0].admin.GetFederation(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	doc := *st.Document
	doc.Generation++
	both := []vdibroker.Member{{Pod: "pod0", HostPool: "office-pod0"}, {Pod: "pod1", HostPool: "office-pod1"}}
	doc.GlobalEntitlements = append(slices.Clone(doc.GlobalEntitlements),
		vdibroker.GlobalEntitlement{Name: "crm", Kind: vdibroker.KindApplication, Application: "paint", AllUsers: true, Members: both},
		vdibroker.GlobalEntitlement{Name: "crm-pod", Kind: vdibroker.KindApplication, Application: "paint", AllUsers: true, Members: both,
			Scope: vdibroker.ScopeWithinPod},
		vdibroker.GlobalEntitlement{Name: "crm-pod0", Kind: vdibroker.KindApplication, Application: "paint", AllUsers: true,
			Members: both[:1]},
		// pod1's member has the name of pod0's pool: still another pod's.
		vdibroker.GlobalEntitlement{Name: "crm-same", Kind: vdibroker.KindApplication, Application: "paint", AllUsers: true,
			Members: []vdibroker.Member{both[0], {Pod: "pod1", HostPool: "office-pod0"}}},
		// A desktop needs no host that can run RemoteApps.
		vdibroker.GlobalEntitlement{Name: "desk-pod", Kind: vdibroker.KindDesktop, AllUsers: true, Members: both,
			Scope: vdibroker.ScopeWithinPod})
	for i, e := range envs {
		d := doc
		if _, err := e.admin.PutFederation(t.Context(), &d); err != nil {
			t.Fatal(err)
		}
		pod := []string{"pod0", "pod1"}[i]
		e.appGroup("office-"+pod+"-apps", "office-"+pod, "paint")
	}
	unavailable := func(e *env, step string, want ...string) {
		t.Helper()
		f, err := e.client(0, e.userToken("ann", nil)).Feed(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range f.Resources {
			if r.Unavailable != "" {
				got = append(got, r.ID+" "+r.Unavailable)
			}
		}
		var w []string
		for _, id := range want {
			w = append(w, "global:"+id+" "+vdibroker.ERemoteAppUnsupported)
		}
		if !slices.Equal(got, w) {
			t.Errorf("%s: unavailable %q, want %q", step, got, w)
		}
	}
	envs[0].sayRemoteApps("pod0-h001", false)
	envs[1].sayRemoteApps("pod1-h001", true)
	unavailable(envs[0], "pod0 cannot, at pod0", "crm-pod", "crm-pod0")
	// What the feed says is what their connects answer.
	for _, ge := range []string{"crm-pod", "crm-pod0"} {
		_, err := envs[0].admin.GlobalConnect(t.Context(), ge, vdibroker.GlobalConnectRequest{User: "ann"})
		wantCode(t, err, vdibroker.ERemoteAppUnsupported, `"`+ge+`"`)
	}
	if _, err := envs[0].admin.GlobalConnect(t.Context(), "crm", vdibroker.GlobalConnectRequest{User: "ann"}); err != nil {
		t.Fatalf("crm, available at pod0: %v", err)
	}
	// At pod1, crm-pod0's member is another pod's: pod1 cannot tell.
	unavailable(envs[1], "pod0 cannot, at pod1")
	envs[1].sayRemoteApps("pod1-h001", false)
	unavailable(envs[0], "neither can, at pod0", "crm-pod", "crm-pod0")
	unavailable(envs[1], "neither can, at pod1", "crm-pod")
	envs[0].sayRemoteApps("pod0-h001", true)
	unavailable(envs[0], "pod0 can again, at pod0")
}
