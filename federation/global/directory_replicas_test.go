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
			ctx := t.Context()
			dbA, dbB := replicaStores(t, engine)
			doc := &vdibroker.Federation{Generation: 1, GlobalEntitlements: []vdibroker.GlobalEntitlement{{Name: "g",
				Members: []vdibroker.Member{{Pod: "pod0", HostPool: "p"}}}}}
			for i := range federation.DirectoryMinPods {
				doc.Pods = append(doc.Pods, vdibroker.Pod{Name: fmt.Sprintf("pod%d", i), URL: "http://127.0.0.1:1"})
			}
			if _, err := dbA.PutFederation(ctx, doc); err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC()
			p := vdibroker.NewHostPool("p")
			p.CreateTime, p.UpdateTime = now, now
			if _, err := dbA.PutHostPool(ctx, p); err != nil {
				t.Fatal(err)
			}
			if _, err := dbA.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: "p", Name: "h1", Address: "h1:3389",
				Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: now}); err != nil {
				t.Fatal(err)
			}
			// A user whose directory pod is pod0: its entry is in this
			// store.
			user := ""
			for i := 0; user == ""; i++ {
				if u := fmt.Sprintf("u%d", i); federation.DirectoryPod(doc, u) == "pod0" {
					user = u
				}
			}
			registered := func() bool {
				t.Helper()
				pods, _, err := dbB.LookupDirectory(ctx, user, time.Time{})
				if err != nil {
					t.Fatal(err)
				}
				return slices.Equal(pods, []string{"pod0"})
			}

			clk := clocktesting.NewFakeClock(now)
			peers := &wholeLists{ends: map[string]int{}}
			var waitingA atomic.Bool
			a := global.New(global.Config{Pod: "pod0", Store: dbA, Hosts: noHosts{}, Peers: peers, Clock: clk, OutagePlacementsWaiting: waitingA.Load})
			b := global.New(global.Config{Pod: "pod0", Store: dbB, Hosts: noHosts{}, Peers: peers, Clock: clk})
			pass := func(name string, g *global.Service) {
				t.Helper()
				if err := g.DirectoryPass(ctx); err != nil {
					t.Fatalf("replica %s's pass: %v", name, err)
				}
			}
			behind := func(name string, g *global.Service) bool {
				t.Helper()
				l, err := g.PodLoads(ctx)
				if err != nil {
					t.Fatalf("replica %s's load summary: %v", name, err)
				}
				return l.DirectoryBehind
			}

			// The session's id is made during the outage; the passes of
			// the ten seconds after it look back two seconds each.
			sess := &vdibroker.UserSession{ID: vdibroker.NewID(), User: user, HostPool: "p", SessionHost: "h1",
				State: vdibroker.StatePending, CreateTime: now, StateTime: now}
			clk.Step(10 * time.Second)
			pass("A", a)
			pass("B", b)
			if behind("A", a) || behind("B", b) {
				t.Fatalf("after both whole lists: behind A %v, B %v; want neither", behind("A", a), behind("B", b))
			}
			peers.take()

			// A holds it unwritten: only A's memory knows.
			waitingA.Store(true)
			if !behind("A", a) {
				t.Error("replica A holds an outage placement unwritten: its load summary is not behind")
			}
			// A writes it.
			if err := dbA.CommitPlacement(ctx, &vdibroker.PlacementCommit{Session: sess, MaxSessionLimit: 10, Pooled: true,
				OutagePlacement: true}); err != nil {
				t.Fatal(err)
			}
			waitingA.Store(false)
			if !behind("B", b) {
				t.Fatal("replica A wrote outage placements: replica B's load summary says the directory vouches for pod0")
			}
			if !behind("A", a) {
				t.Error("replica A wrote outage placements: its own load summary is not behind")
			}
			if registered() {
				t.Fatalf("%s registered before any pass", user)
			}

			// B's next pass sends its whole list, which has the session.
			clk.Step(global.DirectoryEvery)
			pass("B", b)
			if got := peers.take(); len(got) != federation.DirectoryMinPods-1 {
				t.Errorf("whole lists replica B sent to the peers: %v; want one to each of the %d", got, federation.DirectoryMinPods-1)
			}
			if !registered() {
				t.Errorf("after replica B's pass, %s (whose session A wrote) is not at their directory pod", user)
			}
			if behind("B", b) {
				t.Error("after replica B's whole list: B still behind")
			}
			// A, whose last whole list was read before, sends its own.
			if !behind("A", a) {
				t.Error("replica A, whose whole list was read before the write: not behind")
			}
			pass("A", a)
			if got := peers.take(); len(got) != federation.DirectoryMinPods-1 || behind("A", a) {
				t.Errorf("replica A's pass: whole lists %v, behind %v; want one to each peer, and not behind", got, behind("A", a))
			}
			// Nothing written since: the next passes send no whole list.
			clk.Step(global.DirectoryEvery)
			pass("B", b)
			if got := peers.take(); len(got) != 0 {
				t.Errorf("replica B's pass with nothing written since: whole lists %v; want none", got)
			}
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
			for _, pod := range []string{"pod1", last} {
				if err := g.PodRegister(ctx, pod, vdibroker.PodDirectoryRequest{Generation: 1, Users: []string{"alice"}}); err != nil {
					t.Fatalf("%s registers: %v", pod, err)
				}
			}
			lookup := func() []string {
				t.Helper()
				pods, _, err := db.LookupDirectory(ctx, "alice", time.Time{})
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
