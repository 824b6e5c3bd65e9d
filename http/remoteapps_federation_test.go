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
