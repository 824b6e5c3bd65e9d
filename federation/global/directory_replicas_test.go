package global_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/federation"
	"github.com/vdibroker/vdibroker/federation/global"
	"github.com/vdibroker/vdibroker/internal/pgtest"
	"github.com/vdibroker/vdibroker/store"
)

// wholeLists is the peers of a pod: it takes every registration and
// counts the whole lists that ended (full and last), per peer.
type wholeLists struct {
	vdibroker.PodClient
	mu   sync.Mutex
	ends map[string]int
}

func (p *wholeLists) Register(_ context.Context, pod vdibroker.Pod, req vdibroker.PodDirectoryRequest) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if req.Full && req.Last {
		p.ends[pod.Name]++
	}
	return nil
}

func (p *wholeLists) take() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.ends
	p.ends = map[string]int{}
	return n
}

// noHosts reads no pool: a load summary's facts are not what these tests
// look at.
type noHosts struct{}

func (noHosts) SessionHosts(context.Context, string) (*vdibroker.HostPool, []*vdibroker.SessionHost, error) {
	return nil, nil, vdibroker.Errorf(vdibroker.ENotFound, "no pools here")
}
func (noHosts) Present(*vdibroker.HostPool, []*vdibroker.SessionHost, ...*vdibroker.SessionHost) {}

// replicaStores returns two stores of one database, as two replicas of a
// pod hold: on PostgreSQL two connection pools; on SQLite, whose pod is
// one process, the one store.
func replicaStores(t *testing.T, engine string) (a, b *store.DB) {
	t.Helper()
	open := func(dsn, dir string) *store.DB {
		db, err := store.OpenWith(t.Context(), dsn, dir, slog.New(slog.DiscardHandler), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	if engine == "sqlite" {
		a = open("", t.TempDir())
		return a, a
	}
	dsn := pgtest.SchemaDSN(t, "vdibroker_dirreplicas_", "PostgreSQL session directory replicas")
	return open(dsn, ""), open(dsn, "")
}

// replicaPod is two replicas, A and B, of pod0 on one store (replicaStores),
// pod0's pool p a member of global entitlement g in a document of
// DirectoryMinPods pods, with one host, and a user whose directory pod is
// pod0 (so their entry is in this store). A's OutagePlacementsWaiting is
// waitingA.
type replicaPod struct {
	t        *testing.T
	dbA, dbB *store.DB
	doc      *vdibroker.Federation
	user     string
	now      time.Time // when the fixture was made: the fake clock's start
	clk      *clocktesting.FakeClock
	peers    *wholeLists
	a, b     *global.Service
	waitingA atomic.Bool
}

func newReplicaPod(t *testing.T, engine string) *replicaPod {
	t.Helper()
	ctx := t.Context()
	r := &replicaPod{t: t, now: time.Now().UTC(), peers: &wholeLists{ends: map[string]int{}}}
	r.dbA, r.dbB = replicaStores(t, engine)
	r.doc = &vdibroker.Federation{Generation: 1, GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "g",
		Members: []vdibroker.Member{{Pod: "pod0", HostPool: "p"}}}}}
	for i := range federation.DirectoryMinPods {
		r.doc.Pods = append(r.doc.Pods, vdibroker.Pod{Name: fmt.Sprintf("pod%d", i), URL: "http://127.0.0.1:1"})
	}
	if _, err := r.dbA.PutFederation(ctx, r.doc); err != nil {
		t.Fatal(err)
	}
	p := vdibroker.NewHostPool("p")
	p.CreateTime, p.UpdateTime = r.now, r.now
	if _, err := r.dbA.PutHostPool(ctx, p, vdibroker.Precondition{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.dbA.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: "p", Name: "h1", Address: "h1:3389",
		Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: r.now}); err != nil {
		t.Fatal(err)
	}
	for i := 0; r.user == ""; i++ {
		if u := fmt.Sprintf("u%d", i); federation.DirectoryPod(r.doc, u) == "pod0" {
			r.user = u
		}
	}
	r.clk = clocktesting.NewFakeClock(r.now)
	r.a = global.New(global.Config{Pod: "pod0", Store: r.dbA, Hosts: noHosts{}, Peers: r.peers, Clock: r.clk, OutagePlacementsWaiting: r.waitingA.Load})
	r.b = global.New(global.Config{Pod: "pod0", Store: r.dbB, Hosts: noHosts{}, Peers: r.peers, Clock: r.clk})
	return r
}

// session is a new session of the user on h1 whose id was made at made.
func (r *replicaPod) session(made time.Time) *vdibroker.UserSession {
	return &vdibroker.UserSession{ID: fmt.Sprintf("%012x", made.UnixMilli()) + vdibroker.NewID()[12:], User: r.user,
		HostPool: "p", SessionHost: "h1", State: vdibroker.StatePending, CreateTime: r.now, StateTime: r.now}
}

// registered reports whether the user's entry names pod0.
func (r *replicaPod) registered() bool {
	r.t.Helper()
	pods, _, err := r.dbB.LookupDirectory(r.t.Context(), r.user, time.Time{})
	if err != nil {
		r.t.Fatal(err)
	}
	return slices.Equal(pods, []string{"pod0"})
}

func (r *replicaPod) pass(name string, g *global.Service) {
	r.t.Helper()
	if err := g.DirectoryPass(r.t.Context()); err != nil {
		r.t.Fatalf("replica %s's pass: %v", name, err)
	}
}

// behind is the replica's load summary's DirectoryBehind.
func (r *replicaPod) behind(name string, g *global.Service) bool {
	r.t.Helper()
	l, err := g.PodLoads(r.t.Context())
	if err != nil {
		r.t.Fatalf("replica %s's load summary: %v", name, err)
	}
	return l.DirectoryBehind
}

// wholeListsOfB checks that B's passes within DirectoryRetry of its last
// whole list send none and leave it behind; that its pass after sends a
// whole list to each peer, which registers the user, and leaves B not
// behind; then that A, whose last whole list was read before, is behind
// and sends its own.
func (r *replicaPod) wholeListsOfB(why string) {
	r.t.Helper()
	r.clk.Step(global.DirectoryEvery)
	r.pass("B", r.b)
	if got := r.peers.take(); len(got) != 0 || !r.behind("B", r.b) {
		r.t.Errorf("%s: replica B's pass a second later: whole lists %v, behind %v; want none until %s after the last, and behind", why, got, r.behind("B", r.b), global.DirectoryRetry)
	}
	// The session's id is older than the passes look back: only a whole
	// list registers it.
	if r.registered() {
		r.t.Fatalf("%s: %s registered by a pass that reads only new ids: the session is not one this test is about", why, r.user)
	}
	r.clk.Step(global.DirectoryRetry)
	r.pass("B", r.b)
	if got := r.peers.take(); len(got) != federation.DirectoryMinPods-1 {
		r.t.Errorf("%s: whole lists replica B sent to the peers: %v; want one to each of the %d", why, got, federation.DirectoryMinPods-1)
	}
	if !r.registered() {
		r.t.Errorf("%s: after replica B's pass, %s is not at their directory pod", why, r.user)
	}
	if r.behind("B", r.b) {
		r.t.Errorf("%s: after replica B's whole list: B still behind", why)
	}
	if !r.behind("A", r.a) {
		r.t.Errorf("%s: replica A, whose whole list was read before the write: not behind", why)
	}
	r.pass("A", r.a)
	if got := r.peers.take(); len(got) != federation.DirectoryMinPods-1 || r.behind("A", r.a) {
		r.t.Errorf("%s: replica A's pass: whole lists %v, behind %v; want one to each peer, and not behind", why, got, r.behind("A", r.a))
	}
	// Nothing written since: the next passes send no whole list.
	r.clk.Step(global.DirectoryEvery)
	r.pass("B", r.b)
	if got := r.peers.take(); len(got) != 0 {
		r.t.Errorf("%s: replica B's pass with nothing written since: whole lists %v; want none", why, got)
	}
}

// TestDirectoryReplicasOutagePlacements_RG1_ROUT3: two replicas of pod0
// on one store. Replica A writes sessions placed during a store outage
// (R-OUT3), whose ids are older than any pass looks back. Replica B, which
// held none of them, says in its load summary that the directory cannot
// vouch for pod0 (DirectoryBehind) until a whole list read after they
// were written is through, and its next pass sends one, which registers
// the user at their directory pod (R-G1): a peer whose load call reaches
// B asks pod0 itself meanwhile and finds the session.
func TestDirectoryReplicasOutagePlacements_RG1_ROUT3(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			r := newReplicaPod(t, engine)
			// The session's id is made during the outage; the passes of
			// the ten seconds after it look back two seconds each.
			sess := r.session(r.now)
			r.clk.Step(10 * time.Second)
			r.pass("A", r.a)
			r.pass("B", r.b)
			if r.behind("A", r.a) || r.behind("B", r.b) {
				t.Fatalf("after both whole lists: behind A %v, B %v; want neither", r.behind("A", r.a), r.behind("B", r.b))
			}
			r.peers.take()

			// A holds it unwritten: only A's memory knows.
			r.waitingA.Store(true)
			if !r.behind("A", r.a) {
				t.Error("replica A holds an outage placement unwritten: its load summary is not behind")
			}
			// A writes it.
			if err := r.dbA.CommitPlacement(t.Context(), &vdibroker.PlacementCommit{Session: sess, MaxSessionLimit: 10, Pooled: true,
				OutagePlacement: true}); err != nil {
				t.Fatal(err)
			}
			r.waitingA.Store(false)
			if !r.behind("B", r.b) {
				t.Fatal("replica A wrote outage placements: replica B's load summary says the directory vouches for pod0")
			}
			if !r.behind("A", r.a) {
				t.Error("replica A wrote outage placements: its own load summary is not behind")
			}
			if r.registered() {
				t.Fatalf("%s registered before any pass", r.user)
			}
			r.wholeListsOfB("outage placement")
		})
	}
}

// TestDirectoryReplicasLateCommit_RG1: as above, but the session is a
// connect's whose commit came LateCommit or more after its id was made (a
// slow store): no outage, no replica holds anything in memory, and the
// incremental passes, which look back from the pass before, would never
// read it. The store's count of late writes makes B say it is behind and
// send its whole list, as after an outage.
func TestDirectoryReplicasLateCommit_RG1(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			r := newReplicaPod(t, engine)
			r.pass("A", r.a)
			r.pass("B", r.b)
			r.peers.take()
			// Two passes later, a session whose id was made before the
			// first of them is committed (by the fake clock the passes
			// read, and by the real one the store reads: it started at
			// r.now).
			sess := r.session(r.now.Add(-vdibroker.LateCommit - 100*time.Millisecond))
			for range 2 {
				r.clk.Step(global.DirectoryEvery)
				r.pass("A", r.a)
				r.pass("B", r.b)
			}
			if err := r.dbA.CommitPlacement(t.Context(), &vdibroker.PlacementCommit{Session: sess, MaxSessionLimit: 10, Pooled: true}); err != nil {
				t.Fatal(err)
			}
			if !r.behind("B", r.b) {
				t.Fatal("replica A committed a session late: replica B's load summary says the directory vouches for pod0")
			}
			r.wholeListsOfB("late commit")
		})
	}
}

// TestDirectoryDropsRemovedPods_RG1: a directory pod keeps the entries of
// the pods of its document across passes; when a new generation removes
// a pod, its next pass drops that pod's entries (it registers no more,
// and its entries would name a pod no connect asks), and keeps the
// others'.
func TestDirectoryDropsRemovedPods_RG1(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			ctx := t.Context()
			db, _ := replicaStores(t, engine)
			doc := &vdibroker.Federation{Generation: 1}
			for i := range federation.DirectoryMinPods + 1 {
				doc.Pods = append(doc.Pods, vdibroker.Pod{Name: fmt.Sprintf("pod%d", i), URL: "http://127.0.0.1:1"})
			}
			if _, err := db.PutFederation(ctx, doc); err != nil {
				t.Fatal(err)
			}
			clk := clocktesting.NewFakeClock(time.Now())
			g := global.New(global.Config{Pod: "pod0", Store: db, Hosts: noHosts{}, Peers: &wholeLists{ends: map[string]int{}}, Clock: clk})
			last := doc.Pods[len(doc.Pods)-1].Name
			// A user whose directory pod is pod0 (PodRegister takes no
			// other from a pod on its generation).
			alice := "alice"
			for i := 0; federation.DirectoryPod(doc, alice) != "pod0"; i++ {
				alice = fmt.Sprintf("alice%d", i)
			}
			for _, pod := range []string{"pod1", last} {
				if err := g.PodRegister(ctx, pod, vdibroker.PodDirectoryRequest{Generation: 1, Users: []string{alice}}); err != nil {
					t.Fatalf("%s registers: %v", pod, err)
				}
			}
			lookup := func() []string {
				t.Helper()
				pods, _, err := db.LookupDirectory(ctx, alice, time.Time{})
				if err != nil {
					t.Fatal(err)
				}
				return pods
			}
			passes := func() {
				t.Helper()
				for range 2 {
					clk.Step(global.DirectoryEvery)
					if err := g.DirectoryPass(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			passes()
			if got, want := lookup(), []string{"pod1", last}; !slices.Equal(got, want) {
				t.Fatalf("alice's pods with every pod in the document: %v, want %v", got, want)
			}
			// Generation 2 removes the last pod.
			removed := *doc
			removed.Generation, removed.Pods = 2, doc.Pods[:len(doc.Pods)-1]
			if _, err := db.PutFederation(ctx, &removed); err != nil {
				t.Fatal(err)
			}
			passes()
			if got, want := lookup(), []string{"pod1"}; !slices.Equal(got, want) {
				t.Errorf("alice's pods after generation 2 removed %s: %v, want %v", last, got, want)
			}
		})
	}
}
