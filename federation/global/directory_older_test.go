package global

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
)

// oldPeer is dirPeer whose pods answer a registration NotFound (a
// replica of an older version, without the route) while old is set.
type oldPeer struct {
	dirPeer
	old *atomic.Bool
}

func (p oldPeer) Register(ctx context.Context, pod vdibroker.Pod, req vdibroker.PodDirectoryRequest) error {
	if p.old.Load() {
		return vdibroker.Errorf(vdibroker.ENotFound, "no API at POST %s", federation.DirectoryPath)
	}
	return p.dirPeer.Register(ctx, pod, req)
}

// TestDirectoryRegisterNotFoundAfterTaken_RG1: a registration a peer
// answers NotFound is no failure when that peer never took one (an older
// pod: it vouches for nobody). Once it took this pod's whole list, its
// store may vouch for this pod (another of its replicas answers the
// look-up, as in a rolling upgrade): a NotFound then loses a session it
// vouches for, and this pod is behind.
func TestDirectoryRegisterNotFoundAfterTaken_RG1(t *testing.T) {
	doc := &vdibroker.Federation{Generation: 1, GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "g",
		Members: []vdibroker.Member{{Pod: "pod0", HostPool: "p"}}}}}
	for i := range federation.DirectoryMinPods {
		doc.Pods = append(doc.Pods, vdibroker.Pod{Name: fmt.Sprintf("pod%d", i), URL: "http://127.0.0.1:1"})
	}
	// A user whose directory pod is a peer.
	user := ""
	for i := 0; user == ""; i++ {
		if u := fmt.Sprintf("u%d", i); federation.DirectoryPod(doc, u) != "pod0" {
			user = u
		}
	}
	for _, tc := range []struct {
		name       string
		tookBefore bool
		want       bool
	}{{"never took one", false, false}, {"took the whole list", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			st := &sessionsStore{doc: doc, sessions: map[string]string{}, got: map[string]bool{}}
			clk := clocktesting.NewFakeClock(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC))
			old := &atomic.Bool{}
			old.Store(!tc.tookBefore)
			g := New(Config{Pod: "pod0", Store: st, Peers: oldPeer{dirPeer{s: st}, old}, Clock: clk})
			pass := func() error { clk.Step(DirectoryEvery); return g.DirectoryPass(t.Context()) }
			if err := pass(); err != nil || g.directoryBehind(t.Context(), doc) {
				t.Fatalf("first whole list: %v, behind %v", err, g.directoryBehind(t.Context(), doc))
			}
			old.Store(true)
			st.mu.Lock()
			st.sessions[idAt(clk.Now())+"00000000000000000001"] = user
			st.mu.Unlock()
			err := pass()
			if got := g.directoryBehind(t.Context(), doc); got != tc.want || (err != nil) != tc.want {
				t.Errorf("%s's session registered at its directory pod, answered NotFound: %v, behind %v; want behind %v", user, err, got, tc.want)
			}
		})
	}
}
