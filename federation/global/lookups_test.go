package global

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
)

// heldPeer is a PodClient whose first Sessions call waits for release;
// it answers each user asked with one session of that user (its name in
// upper case: users compare folded, R-E5). old refuses users, as a pod of
// an earlier version does.
type heldPeer struct {
	vdibroker.PodClient
	old              bool
	entered, release chan struct{}
	once             sync.Once

	mu    sync.Mutex
	calls [][]string // the users of each call
}

func (p *heldPeer) Sessions(ctx context.Context, pod vdibroker.Pod, req vdibroker.PodSessionsRequest) ([]*vdibroker.UserSession, error) {
	users := req.Users
	if req.User != "" {
		users = []string{req.User}
	}
	p.mu.Lock()
	p.calls = append(p.calls, users)
	p.mu.Unlock()
	p.once.Do(func() { close(p.entered); <-p.release })
	if p.old && len(req.Users) > 0 {
		return nil, vdibroker.FieldError("users", "unknown field")
	}
	var out []*vdibroker.UserSession
	for _, u := range users {
		out = append(out, &vdibroker.UserSession{ID: "s-" + u, User: strings.ToUpper(u), HostPool: req.HostPools[0]})
	}
	return out, nil
}

// TestLookupsShareCalls_RG1: the look-ups that ask a peer while a call to
// it is under way go together in the next call (a user asked twice once),
// and each gets its own user's sessions and no one else's; a peer that
// refuses users (an older version) is asked user by user.
func TestLookupsShareCalls_RG1(t *testing.T) {
	for _, tc := range []struct {
		name string
		old  bool
		// calls: the held one, then the six users together; an old
		// peer refuses that and is asked six times more.
		wantCalls int
	}{
		{"current peer", false, 2},
		{"older peer", true, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peer := &heldPeer{old: tc.old, entered: make(chan struct{}), release: make(chan struct{})}
			g := New(Config{Pod: "pod0", Peers: peer, PodTimeout: time.Minute})
			pod, pools := vdibroker.Pod{Name: "pod1"}, []string{"desk"}
			ctx := t.Context()
			type result struct {
				user     string
				sessions []*vdibroker.UserSession
				err      error
			}
			results := make(chan result, 8)
			ask := func(u string) {
				s, err := g.callSessions(ctx, pod, u, pools)
				results <- result{u, s, err}
			}
			go ask("first")
			<-peer.entered
			asked := []string{"u1", "u2", "u3", "U3", "u4", "u5", "u6"}
			for _, u := range asked {
				go ask(u)
			}
			// Wait for the seven to queue behind the held call.
			key := pod.Name + "\x00desk"
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
				g.mu.Lock()
				n := len(g.lookups[key].queue)
				g.mu.Unlock()
				if n == len(asked) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d look-ups queued, want %d", n, len(asked))
				}
			}
			close(peer.release)
			for range len(asked) + 1 {
				r := <-results
				if r.err != nil || len(r.sessions) != 1 || vdibroker.FoldUser(r.sessions[0].User) != vdibroker.FoldUser(r.user) {
					t.Errorf("%s: %v %v; want its own one session", r.user, r.sessions, r.err)
				}
			}
			peer.mu.Lock()
			defer peer.mu.Unlock()
			if len(peer.calls) != tc.wantCalls {
				t.Fatalf("calls %q; want %d", peer.calls, tc.wantCalls)
			}
			var second []string
			for _, u := range peer.calls[1] {
				second = append(second, strings.ToLower(u))
			}
			if slices.Sort(second); !slices.Equal(second, []string{"u1", "u2", "u3", "u4", "u5", "u6"}) {
				t.Errorf("the second call asked %q; want the six users queued, u3 once", second)
			}
		})
	}
}

// readsStore is a FederationStore with one document whose
// OpenSessionsOfUsers counts its reads and answers a session per user.
type readsStore struct {
	vdibroker.FederationStore
	doc *vdibroker.Federation

	mu    sync.Mutex
	reads [][]string // the users of each read
	pools [][]string // and its pools
}

func (s *readsStore) GetFederation(context.Context) (*vdibroker.Federation, error) { return s.doc, nil }

func (s *readsStore) OpenSessionsOfUsers(_ context.Context, users, pools []string) ([]*vdibroker.UserSession, error) {
	s.mu.Lock()
	s.reads = append(s.reads, users)
	s.pools = append(s.pools, pools)
	s.mu.Unlock()
	var out []*vdibroker.UserSession
	for _, u := range users {
		out = append(out, &vdibroker.UserSession{ID: "s-" + u, User: u, HostPool: pools[0]})
	}
	return out, nil
}

// TestPodSessionsOneRead_RG1: a peer asked about several users at once
// (the look-ups of several global connects, TestLookupsShareCalls_RG1)
// reads their sessions in one store call, not one per user, and only in
// the pools of its own that are members, each once (a caller's other
// pools are not read, nor a pool it names again: R-SEC, a peer's call is
// bounded).
func TestPodSessionsOneRead_RG1(t *testing.T) {
	st := &readsStore{doc: &vdibroker.Federation{Generation: 1, Pods: []vdibroker.Pod{{Name: "pod1"}},
		GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "ge", Members: []vdibroker.Member{{Pod: "pod1", HostPool: "desk"}}}}}}
	g := New(Config{Pod: "pod1", Store: st})
	users := []string{"u1", "u2", "u3"}
	got, err := g.PodSessions(t.Context(), vdibroker.PodSessionsRequest{Users: users, HostPools: []string{"desk", "other", "desk", "desk"}})
	if err != nil || len(got.Sessions) != 3 {
		t.Fatalf("PodSessions: %+v %v; want a session of each user", got, err)
	}
	if len(st.reads) != 1 || !slices.Equal(st.reads[0], users) || !slices.Equal(st.pools[0], []string{"desk"}) {
		t.Errorf("store reads %q of pools %q; want one, of the three users, in desk alone, once (other is no member)", st.reads, st.pools)
	}
	// No member pool asked about: nothing is read, and the answer is an
	// empty list (JSON []), not null.
	got, err = g.PodSessions(t.Context(), vdibroker.PodSessionsRequest{Users: users, HostPools: []string{"other"}})
	if err != nil || got.Sessions == nil || len(got.Sessions) != 0 || len(st.reads) != 1 {
		t.Errorf("PodSessions of a pool that is no member: %+v %v after %d reads; want an empty list, no read", got, err, len(st.reads))
	}
}

// poolsPeer answers each sessions call with one session of its user in
// each pool named, and records the pools of each call.
type poolsPeer struct {
	vdibroker.PodClient
	mu    sync.Mutex
	calls []int
}

func (p *poolsPeer) Sessions(ctx context.Context, pod vdibroker.Pod, req vdibroker.PodSessionsRequest) ([]*vdibroker.UserSession, error) {
	if len(req.HostPools) > vdibroker.MaxPodSessionPools {
		return nil, vdibroker.FieldError("hostPools", "too many")
	}
	p.mu.Lock()
	p.calls = append(p.calls, len(req.HostPools))
	p.mu.Unlock()
	var out []*vdibroker.UserSession
	for _, pool := range req.HostPools {
		out = append(out, &vdibroker.UserSession{ID: "s-" + pool, User: req.User, HostPool: pool})
	}
	return out, nil
}

// TestLookupOfManyPools_RG1: an entitlement with more member pools on a
// peer than one sessions call takes (MaxPodSessionPools) asks for them in
// several calls, and finds the user's sessions in all of them.
func TestLookupOfManyPools_RG1(t *testing.T) {
	peer := &poolsPeer{}
	g := New(Config{Pod: "pod0", Peers: peer, PodTimeout: time.Minute})
	pools := make([]string, vdibroker.MaxPodSessionPools+44)
	for i := range pools {
		pools[i] = "pool" + strconv.Itoa(i)
	}
	got, err := g.callSessions(t.Context(), vdibroker.Pod{Name: "pod1"}, "alice", pools)
	if err != nil || len(got) != len(pools) {
		t.Fatalf("alice's sessions in %d pools: %d, %v; want one in each", len(pools), len(got), err)
	}
	if want := []int{vdibroker.MaxPodSessionPools, 44}; !slices.Equal(peer.calls, want) {
		t.Errorf("the calls' pools: %v, want %v", peer.calls, want)
	}
}
