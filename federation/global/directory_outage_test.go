package global

import (
	"context"
	"fmt"
	"sync"
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

type dirPeer struct {
	vdibroker.PodClient
	s *sessionsStore
}

func (p dirPeer) Register(ctx context.Context, _ vdibroker.Pod, req vdibroker.PodDirectoryRequest) error {
	return p.s.RegisterDirectory(ctx, "", 0, req.Users, false, false, time.Time{})
}

// TestDirectoryPassOutagePlacements_RG1: sessions placed during a store
// outage (R-OUT3) are written when the store is back, with ids made
// during the outage, older than a pass looks back. While they wait to be
// written the pod is behind; once written (by a run a pass saw waiting,
// or one none saw), its whole list is sent again and has them; written
// while a whole list was read, the pod stays behind and sends it again.
func TestDirectoryPassOutagePlacements_RG1(t *testing.T) {
	doc := &vdibroker.Federation{Generation: 1, GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "g",
		Members: []vdibroker.Member{{Pod: "pod0", HostPool: "p"}}}}}
	for i := range federation.DirectoryMinPods {
		doc.Pods = append(doc.Pods, vdibroker.Pod{Name: fmt.Sprintf("pod%d", i), URL: "http://127.0.0.1:1"})
	}
	st := &sessionsStore{doc: doc, sessions: map[string]string{}, got: map[string]bool{}}
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	waiting, written := false, uint64(0)
	g := New(Config{Pod: "pod0", Store: st, Peers: dirPeer{s: st}, Clock: clk,
		OutagePlacements: func() (bool, uint64) { mu.Lock(); defer mu.Unlock(); return waiting, written }})
	idAgo := func(c clock.PassiveClock, d time.Duration) string {
		return idAt(c.Now().Add(-d)) + "00000000000000000001"
	}
	pass := func() error { clk.Step(DirectoryEvery); return g.DirectoryPass(t.Context()) }
	behind := func() bool { return g.directoryBehind(doc) }

	st.sessions[idAgo(clk, time.Minute)] = "before"
	if err := pass(); err != nil || behind() || !st.got["before"] {
		t.Fatalf("first whole list: %v, behind %v, registered %v", err, behind(), st.got)
	}
	// An outage: a session placed in escrow waits to be written.
	mu.Lock()
	waiting = true
	mu.Unlock()
	if err := pass(); err == nil || !behind() {
		t.Fatalf("with outage placements waiting: %v, behind %v; want an error and behind", err, behind())
	}
	// Written, 30 s after its id was made.
	mu.Lock()
	waiting, written = false, 2
	mu.Unlock()
	st.sessions[idAgo(clk, 30*time.Second)] = "outage"
	clk.Step(directoryRetry)
	if err := pass(); err != nil || behind() || !st.got["outage"] {
		t.Fatalf("after the outage placements were written: %v, behind %v, registered %v; want the outage user registered", err, behind(), st.got)
	}
	// An outage no pass saw (shorter than a pass, its reads never
	// refused), whose session was written 30 s after its id: a run of the
	// writer since the last whole list is enough to send it again.
	mu.Lock()
	written = 4
	mu.Unlock()
	st.sessions[idAgo(clk, 30*time.Second)] = "unseen"
	if err := pass(); err != nil || behind() || !st.got["unseen"] {
		t.Fatalf("after outage placements no pass saw: %v, behind %v, registered %v; want unseen registered", err, behind(), st.got)
	}
	// Written again while a whole list is read: behind, sent again.
	st.sessions[idAgo(clk, 20*time.Second)] = "late"
	g.cfg.OutagePlacements = func() (bool, uint64) {
		mu.Lock()
		defer mu.Unlock()
		w := written
		written = 6 // the next call sees a run that wrote meanwhile
		return waiting, w
	}
	if err := pass(); err == nil || !behind() {
		t.Fatalf("outage placements written during the pass: %v, behind %v; want an error and behind", err, behind())
	}
	delete(st.got, "late")
	clk.Step(directoryRetry)
	if err := pass(); err != nil || behind() || !st.got["late"] {
		t.Fatalf("the pass after: %v, behind %v, registered %v; want late registered by a whole list", err, behind(), st.got)
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
	if err := g.DirectoryPass(t.Context()); err != nil || g.directoryBehind(doc) {
		t.Fatalf("pass after the retry time, the store up: %v, behind %v; want a whole list sent", err, g.directoryBehind(doc))
	}
}
