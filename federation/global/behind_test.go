package global

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
)

// behindPeer answers each pod's load summary at generation gen, saying
// its directory entries are behind as behind says, and to a sessions call
// the user's one session there; asked records the pods asked for
// sessions.
type behindPeer struct {
	vdibroker.PodClient
	mu     sync.Mutex
	gen    int64
	behind map[string]bool
	asked  []string
}

func (p *behindPeer) Loads(_ context.Context, pod vdibroker.Pod) (*vdibroker.PodLoads, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &vdibroker.PodLoads{Pod: pod.Name, Generation: p.gen, DirectoryBehind: p.behind[pod.Name],
		Pools: []vdibroker.PoolFacts{{HostPool: "p"}}}, nil
}

func (p *behindPeer) Sessions(_ context.Context, pod vdibroker.Pod, req vdibroker.PodSessionsRequest) ([]*vdibroker.UserSession, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, pod.Name)
	return []*vdibroker.UserSession{{ID: "s-" + pod.Name, User: req.User, HostPool: "p", State: vdibroker.StateActive}}, nil
}

func (p *behindPeer) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	got := p.asked
	p.asked = nil
	slices.Sort(got)
	return got
}

// TestGatherAsksPeersBehind_RG1: a global connect (gather) asks a peer the
// session directory does not name for the user's sessions only when the
// peer's load summary says its directory entries are behind, or is of
// another generation of the document (its registrations are not the
// document's): from a load summary fetched for the connect and from one
// already in the cache alike. A peer asked finds her session; the
// others are passed over, as the directory vouches for them.
func TestGatherAsksPeersBehind_RG1(t *testing.T) {
	doc := &vdibroker.Federation{Generation: 1}
	ge := vdibroker.GlobalEntitlement{Name: "g"}
	for i := range federation.DirectoryMinPods {
		pod := fmt.Sprintf("pod%d", i)
		doc.Pods = append(doc.Pods, vdibroker.Pod{Name: pod, URL: "http://127.0.0.1:1"})
		ge.Members = append(ge.Members, vdibroker.Member{Pod: pod, HostPool: "p"})
	}
	doc.GlobalEntitlements = []vdibroker.GlobalEntitlement{ge}
	peers := doc.Pods[1:4]
	peer := &behindPeer{gen: 1, behind: map[string]bool{"pod2": true}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
	g := New(Config{Pod: "pod0", Peers: peer, Clock: clk, PodTimeout: time.Minute})
	// The directory names no pod of hers and vouches for every pod.
	ask := map[string]bool{}
	check := func(why string, want ...string) {
		t.Helper()
		states := g.gather(t.Context(), doc, peers, "alice", true, &ge, ask, 0)
		if got := peer.take(); !slices.Equal(got, want) {
			t.Errorf("%s: pods asked for her sessions %v, want %v", why, got, want)
		}
		for _, p := range peers {
			st := states[p.Name]
			if found := len(st.sessions) == 1; found != slices.Contains(want, p.Name) || st.Err != "" || st.Pools["p"].HostPool != "p" {
				t.Errorf("%s: %s's state %+v (her session found %v)", why, p.Name, st, found)
			}
		}
	}
	check("load summaries fetched", "pod2")
	check("load summaries cached", "pod2")
	// pod2 has caught up; pod3 falls behind.
	peer.mu.Lock()
	peer.behind = map[string]bool{"pod3": true}
	peer.mu.Unlock()
	clk.Step(g.cfg.LoadTTL)
	check("pod3 behind, fetched", "pod3")
	check("pod3 behind, cached", "pod3")
	// Every peer on a newer generation than the connect's document.
	peer.mu.Lock()
	peer.gen, peer.behind = 2, nil
	peer.mu.Unlock()
	clk.Step(g.cfg.LoadTTL)
	check("another generation, fetched", "pod1", "pod2", "pod3")
	check("another generation, cached", "pod1", "pod2", "pod3")
}

func (p *behindPeer) Lookup(context.Context, vdibroker.Pod, vdibroker.PodLookupRequest) (*vdibroker.PodLookup, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	complete := map[string]int64{}
	for i := range federation.DirectoryMinPods {
		complete[fmt.Sprintf("pod%d", i)] = 1
	}
	return &vdibroker.PodLookup{Pods: []string{}, Complete: complete}, nil
}

// TestUserSessionsAsksPeersBehind_RG1: the list of a user's sessions in
// the other pods (R-U3) asks a peer the session directory does not name
// only when its load summary says its directory entries are behind or
// is of another generation, as a global connect does.
func TestUserSessionsAsksPeersBehind_RG1(t *testing.T) {
	doc, st, clk := passFixture()
	for i := range doc.Pods {
		doc.GlobalEntitlements[0].Members = append(doc.GlobalEntitlements[0].Members, vdibroker.Member{Pod: doc.Pods[i].Name, HostPool: "p"})
	}
	peer := &behindPeer{gen: 1, behind: map[string]bool{"pod2": true}}
	g := New(Config{Pod: "pod0", Store: st, Peers: peer, Clock: clk, PodTimeout: time.Minute})
	// A user whose directory pod is a peer (the fake answers its look-up).
	user := "alice"
	for i := 0; federation.DirectoryPod(doc, user) == "pod0"; i++ {
		user = fmt.Sprintf("alice%d", i)
	}
	check := func(why string, want ...string) {
		t.Helper()
		list, err := g.listUserSessions(t.Context(), user, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := peer.take(); !slices.Equal(got, want) {
			t.Errorf("%s: pods asked for her sessions %v, want %v", why, got, want)
		}
		var pods []string
		for _, s := range list.Value {
			pods = append(pods, s.Pod)
		}
		if !slices.Equal(pods, want) || len(list.Unanswered) != 0 {
			t.Errorf("%s: her sessions in %v (unanswered %v), want in %v", why, pods, list.Unanswered, want)
		}
	}
	check("pod2 behind", "pod2")
	peer.mu.Lock()
	peer.gen, peer.behind = 2, nil
	peer.mu.Unlock()
	clk.Step(g.cfg.LoadTTL)
	others := []string{}
	for _, p := range doc.Pods[1:] {
		others = append(others, p.Name)
	}
	check("another generation", others...)
}
