package global

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
)

// sessionsStore is a FederationStore of one document and open sessions
// by id, which records the directory registrations made to it (this
// pod's own) as dirPeer records the peers'. A unit test's store: the
// passes' logic, not SQL (store/directory_test.go has that).
type sessionsStore struct {
	vdibroker.FederationStore
	doc      *vdibroker.Federation
	mu       sync.Mutex
	sessions map[string]string // id -> user
	got      map[string]bool   // users registered, here or at a peer
	down     bool              // GetFederation fails
	docReads int
	writes   int64  // LateSessionWrites
	onRead   func() // called by OpenSessionUsers, under mu
}

func (s *sessionsStore) LateSessionWrites(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes, nil
}

// DropDirectoryPods keeps no entries of other pods to drop.
func (s *sessionsStore) DropDirectoryPods(context.Context, []string) ([]string, error) {
	return nil, nil
}

func (s *sessionsStore) GetFederation(context.Context) (*vdibroker.Federation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docReads++
	if s.down {
		return nil, vdibroker.Errorf(vdibroker.EStoreUnavailable, "the store is down")
	}
	return s.doc, nil
}

func (s *sessionsStore) OpenSessionUsers(_ context.Context, _ []string, after string) ([]string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onRead != nil {
		s.onRead()
	}
	var users []string
	for id, u := range s.sessions {
		if id > after {
			users = append(users, u)
		}
	}
	return users, "", nil
}

func (s *sessionsStore) RegisterDirectory(_ context.Context, _ string, _ int64, users []string, _, _ bool, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range users {
		s.got[u] = true
	}
	return nil
}

// passFixture is what a pass's unit test starts from: a document of
// DirectoryMinPods pods, pod0's pool p a member of global entitlement g,
// its store with no sessions yet, and a fake clock.
func passFixture() (*vdibroker.Federation, *sessionsStore, *clocktesting.FakeClock) {
	doc := &vdibroker.Federation{Generation: 1, GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "g",
		Members: []vdibroker.Member{{Pod: "pod0", HostPool: "p"}}}}}
	for i := range federation.DirectoryMinPods {
		doc.Pods = append(doc.Pods, vdibroker.Pod{Name: fmt.Sprintf("pod%d", i), URL: "http://127.0.0.1:1"})
	}
	st := &sessionsStore{doc: doc, sessions: map[string]string{}, got: map[string]bool{}}
	return doc, st, clocktesting.NewFakeClock(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC))
}

type dirPeer struct {
	vdibroker.PodClient
	s *sessionsStore
}

func (p dirPeer) Register(ctx context.Context, _ vdibroker.Pod, req vdibroker.PodDirectoryRequest) error {
	return p.s.RegisterDirectory(ctx, "", 0, req.Users, false, false, time.Time{})
}

// TestDirectoryPassOutagePlacements_RG1: sessions placed during a store
// outage (R-OUT3) are written when the store is back, with ids made
// during the outage, older than a pass looks back. While this replica
// holds some unwritten the pod is behind; once written (the store's count
// changed, whichever replica wrote them), its whole list is sent again
// and has them; written while a whole list was read, the pod says it is
// behind until the next pass sends it again.
func TestDirectoryPassOutagePlacements_RG1(t *testing.T) {
	doc, st, clk := passFixture()
	var waiting atomic.Bool
	g := New(Config{Pod: "pod0", Store: st, Peers: dirPeer{s: st}, Clock: clk, OutagePlacementsWaiting: waiting.Load})
	idAgo := func(c clock.PassiveClock, d time.Duration) string {
		return idAt(c.Now().Add(-d)) + "00000000000000000001"
	}
	pass := func() error { clk.Step(DirectoryEvery); return g.DirectoryPass(t.Context()) }
	behind := func() bool { return g.directoryBehind(t.Context(), doc) }
	written := func(user string, ago time.Duration) {
		st.mu.Lock()
		defer st.mu.Unlock()
		st.sessions[idAgo(clk, ago)] = user
		st.writes++
	}

	st.sessions[idAgo(clk, time.Minute)] = "before"
	if err := pass(); err != nil || behind() || !st.got["before"] {
		t.Fatalf("first whole list: %v, behind %v, registered %v", err, behind(), st.got)
	}
	// An outage: a session placed in escrow waits to be written.
	waiting.Store(true)
	if !behind() {
		t.Fatal("with outage placements waiting in this replica: not behind")
	}
	if err := pass(); err == nil || !behind() {
		t.Fatalf("with outage placements waiting: %v, behind %v; want an error and behind", err, behind())
	}
	// Written, 30 s after its id was made.
	waiting.Store(false)
	written("outage", 30*time.Second)
	if !behind() {
		t.Fatal("outage placements written since the last whole list: not behind")
	}
	clk.Step(directoryRetry)
	if err := pass(); err != nil || behind() || !st.got["outage"] {
		t.Fatalf("after the outage placements were written: %v, behind %v, registered %v; want the outage user registered", err, behind(), st.got)
	}
	// Written by another replica, or in an outage no pass here saw
	// (nothing waited in this replica): the store's count is enough. The
	// whole list goes at most every lateWait (20 s: late writes came
	// again right after the last); behind until then.
	written("unseen", 30*time.Second)
	if !behind() {
		t.Fatal("outage placements another replica wrote: not behind")
	}
	if err := pass(); err != nil || !behind() || st.got["unseen"] {
		t.Fatalf("a second after the last whole list: %v, behind %v, registered %v; want behind, unseen not yet registered", err, behind(), st.got)
	}
	clk.Step(g.dir.lateWait)
	if err := pass(); err != nil || behind() || !st.got["unseen"] {
		t.Fatalf("after outage placements another replica wrote: %v, behind %v, registered %v; want unseen registered", err, behind(), st.got)
	}
	// Written again while a whole list is read (after the count was):
	// that list may lack it, so behind, and the next pass sends again.
	st.sessions[idAgo(clk, 20*time.Second)] = "during"
	st.writes++
	st.onRead = func() { st.onRead = nil; st.sessions[idAgo(clk, 20*time.Second)] = "late"; st.writes++ }
	clk.Step(g.dir.lateWait)
	if err := pass(); err != nil || !behind() || !st.got["during"] {
		t.Fatalf("outage placements written during the pass: %v, behind %v, registered %v; want during registered and behind", err, behind(), st.got)
	}
	delete(st.got, "late")
	clk.Step(g.dir.lateWait)
	if err := pass(); err != nil || behind() || !st.got["late"] {
		t.Fatalf("the pass after: %v, behind %v, registered %v; want late registered by a whole list", err, behind(), st.got)
	}
}

// wholeListPeer is dirPeer counting the whole lists that ended.
type wholeListPeer struct {
	dirPeer
	ends *int
}

func (p wholeListPeer) Register(ctx context.Context, pod vdibroker.Pod, req vdibroker.PodDirectoryRequest) error {
	if req.Full && req.Last {
		*p.ends++
	}
	return p.dirPeer.Register(ctx, pod, req)
}

// TestDirectoryPassLateWritesBackOff_RG1: late writes that keep coming
// (a store that stays slow) send the whole list after directoryRetry,
// then after twice as long each time, up to DirectoryFullEvery, the pod
// behind meanwhile, whether they come at every pass or every few
// seconds with quiet passes between; once the count has not moved for
// as long as the wait, the next late write is sent after directoryRetry
// again. The replica starts on a store whose count moved before (late
// writes before it started, as when it restarts during a slow store):
// its first whole list is for its start, not caused by late writes, and
// does not double the wait.
func TestDirectoryPassLateWritesBackOff_RG1(t *testing.T) {
	// 0, then 10 s, 20 s, 40 s, 80 s, 160 s apart, then DirectoryFullEvery.
	want := []time.Duration{0, 10 * time.Second, 30 * time.Second, 70 * time.Second, 150 * time.Second, 310 * time.Second}
	for _, every := range []int{1, 5} {
		t.Run(fmt.Sprintf("a late write every %d s", every), func(t *testing.T) {
			doc, st, clk := passFixture()
			st.writes = 7
			ends := 0
			g := New(Config{Pod: "pod0", Store: st, Peers: wholeListPeer{dirPeer{s: st}, &ends}, Clock: clk})
			start := clk.Now()
			var fulls []time.Duration // when each pass sent a whole list, since start
			sent := st.writes         // the count the last whole list read
			pass := func() {
				t.Helper()
				before := ends
				if err := g.DirectoryPass(t.Context()); err != nil {
					t.Fatal(err)
				}
				if ends != before {
					fulls = append(fulls, clk.Now().Sub(start))
					sent = st.writes
				}
			}
			write := func() {
				st.mu.Lock()
				st.writes++
				st.mu.Unlock()
			}
			pass() // the first whole list
			for i := range 600 {
				clk.Step(DirectoryEvery)
				if (i+1)%every == 0 {
					write()
				}
				pass()
				if behind := g.directoryBehind(t.Context(), doc); behind != (st.writes != sent) {
					t.Fatalf("at %s, the count %d, %d at the whole list of %s: behind %v", clk.Now().Sub(start), st.writes, sent, fulls[len(fulls)-1], behind)
				}
			}
			if !slices.Equal(fulls, want) {
				t.Errorf("whole lists at %v; want %v (the next at 610 s)", fulls, want)
			}
			// The writes stop: the whole list at 610 s sends the last of
			// them. A late write after a quiet time shorter than the wait
			// (300 s) still waits for it.
			for range 11 {
				clk.Step(DirectoryEvery)
				pass()
			}
			if got := fulls[len(fulls)-1]; got != 610*time.Second || g.directoryBehind(t.Context(), doc) {
				t.Fatalf("the writes stopped at 600 s: the last whole list at %s, behind %v; want 610s, and not behind", got, g.directoryBehind(t.Context(), doc))
			}
			fulls = nil
			for range 280 { // to 891 s: 291 s quiet
				clk.Step(DirectoryEvery)
				pass()
			}
			write()
			for range 30 {
				clk.Step(DirectoryEvery)
				pass()
			}
			if want := []time.Duration{610*time.Second + DirectoryFullEvery}; !slices.Equal(fulls, want) {
				t.Errorf("a late write after 291 s of quiet: whole lists at %v; want %v", fulls, want)
			}
			// Quiet for the whole wait: the next late write goes with the
			// whole list directoryRetry after the last one.
			for range 300 {
				clk.Step(DirectoryEvery)
				pass()
			}
			fulls = nil
			last := clk.Now().Sub(start)
			write()
			for range 20 {
				clk.Step(DirectoryEvery)
				pass()
			}
			if want := []time.Duration{last + DirectoryEvery}; !slices.Equal(fulls, want) {
				t.Errorf("after 300 s of quiet, a late write's whole list at %v; want %v", fulls, want)
			}
		})
	}
}

// TestDirectoryPassDuringAnOutage_RG1: a pass that cannot read the
// document (the store is down) leaves this pod behind and is tried
// again after directoryRetry, not every second (each failed pass logs a
// warning).
func TestDirectoryPassDuringAnOutage_RG1(t *testing.T) {
	doc := &vdibroker.Federation{Generation: 1}
	for i := range federation.DirectoryMinPods {
		doc.Pods = append(doc.Pods, vdibroker.Pod{Name: fmt.Sprintf("pod%d", i), URL: "http://127.0.0.1:1"})
	}
	st := &sessionsStore{doc: doc, sessions: map[string]string{}, got: map[string]bool{}, down: true}
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC))
	g := New(Config{Pod: "pod0", Store: st, Peers: dirPeer{s: st}, Clock: clk})
	if err := g.DirectoryPass(t.Context()); vdibroker.ErrorCode(err) != vdibroker.EStoreUnavailable {
		t.Fatalf("pass with the store down: %v; want StoreUnavailable", err)
	}
	for range int(directoryRetry/DirectoryEvery) - 1 {
		clk.Step(DirectoryEvery)
		if err := g.DirectoryPass(t.Context()); err != nil {
			t.Fatalf("pass within the retry time: %v; want nothing tried", err)
		}
	}
	if st.docReads != 1 {
		t.Errorf("the document was read %d times in %s; want once (retried after %s)", st.docReads, directoryRetry-DirectoryEvery, directoryRetry)
	}
	st.mu.Lock()
	st.down = false
	st.mu.Unlock()
	clk.Step(DirectoryEvery)
	if err := g.DirectoryPass(t.Context()); err != nil || g.directoryBehind(t.Context(), doc) {
		t.Fatalf("pass after the retry time, the store up: %v, behind %v; want a whole list sent", err, g.directoryBehind(t.Context(), doc))
	}
}

// boundPeer is dirPeer with the bound a pod's /api/v1/pod/directory
// keeps: a call of more than MaxDirectoryUsers users is refused.
type boundPeer struct {
	dirPeer
	largest *int
}

func (p boundPeer) Register(ctx context.Context, pod vdibroker.Pod, req vdibroker.PodDirectoryRequest) error {
	*p.largest = max(*p.largest, len(req.Users))
	if len(req.Users) > vdibroker.MaxDirectoryUsers {
		return vdibroker.FieldError("users", "at most %d users a call, got %d", vdibroker.MaxDirectoryUsers, len(req.Users))
	}
	return p.dirPeer.Register(ctx, pod, req)
}

// TestDirectoryPassInParts_RG1: a pass that finds more new sessions than
// one registration takes (after a long gap) sends them in parts, as a
// whole list is sent, and is not left behind by a refused call.
func TestDirectoryPassInParts_RG1(t *testing.T) {
	doc, st, clk := passFixture()
	largest := 0
	g := New(Config{Pod: "pod0", Store: st, Peers: boundPeer{dirPeer{s: st}, &largest}, Clock: clk})
	if err := g.DirectoryPass(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Enough new users that each directory pod's share is over the bound.
	n := 6 * federation.DirectoryMinPods * vdibroker.MaxDirectoryUsers / 5
	clk.Step(DirectoryEvery)
	for i := range n {
		st.sessions[idAt(clk.Now())+fmt.Sprintf("%020d", i)] = fmt.Sprintf("user%06d", i)
	}
	clk.Step(DirectoryEvery)
	if err := g.DirectoryPass(t.Context()); err != nil || g.directoryBehind(t.Context(), doc) {
		t.Fatalf("a pass of %d new users: %v, behind %v; want them sent in parts", n, err, g.directoryBehind(t.Context(), doc))
	}
	if len(st.got) != n || largest > vdibroker.MaxDirectoryUsers {
		t.Errorf("%d users registered, the largest call %d users; want all %d, at most %d a call", len(st.got), largest, n, vdibroker.MaxDirectoryUsers)
	}
}
