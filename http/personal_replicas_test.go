package http_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestPersistentAutomaticOneHostAcrossServers_RPE1_RD3: a user's first
// connects to a Persistent, Automatic pool, sent at once to three servers
// on one SQLite store, assign the user exactly one host (R-PE1: "the first
// unassigned placeable host ... permanently; later connects go to that
// host"), and every connect is answered with that host. Each server
// serialises its own connects of one user; across servers only the
// database can (R-D3).
func TestPersistentAutomaticOneHostAcrossServers_RPE1_RD3(t *testing.T) {
	persistentAutomaticRace(t, newEnvWith(t, envOptions{replicas: 3}))
}

// TestPersistentAutomaticOneHostAcrossReplicas_RPE1_RD3_Postgres is the
// same with three replicas on one PostgreSQL database.
func TestPersistentAutomaticOneHostAcrossReplicas_RPE1_RD3_Postgres(t *testing.T) {
	dsn := postgresDSN(t)
	persistentAutomaticRace(t, newEnvWith(t, envOptions{dsn: dsn, replicas: 3}))
}

// TestPersistentAutomaticStaleServerKeepsAssignment_RPE1_RD3: a server
// whose view is stale must not give a user a second host in a Persistent
// pool. Alice is assigned pd001 through server 0; server 1 loaded its view
// before that and, having processed only pd002's heartbeat since, sees
// pd001 as Unavailable. When alice's pending session has expired (R-S3)
// and she connects through server 1, the database, not server 1's view,
// says she already has a host (R-PE1, R-D3): she is answered on pd001 and
// stays assigned to it alone.
func TestPersistentAutomaticStaleServerKeepsAssignment_RPE1_RD3(t *testing.T) {
	e := newEnvWith(t, envOptions{replicas: 2})
	ctx := context.Background()
	pool := uniq("stale")
	e.pool(pool, map[string]any{"hostPoolType": "Personal", "personalDesktopAssignmentType": "Automatic",
		"loadBalancerType": "Persistent", "pendingTimeoutSeconds": 60, "heartbeatTimeoutSeconds": 30})
	hosts := e.addHosts(pool, "pd", 2)
	s1 := e.client(1, adminToken)
	if _, err := s1.Connect(ctx, pool, vhttp.ConnectRequest{User: "warmup", DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if first := e.mustConnect(pool, "alice"); first.SessionHost != hosts[0] {
		t.Fatalf("alice's first connect: %s, want %s", first.SessionHost, hosts[0])
	}

	e.clock.Advance(61 * time.Second) // alice's Pending session expires; every host's heartbeat is old
	e.heartbeat(hosts[0])             // through server 0
	e.mu.Lock()
	cred := e.agents[hosts[1]]
	e.mu.Unlock()
	if _, err := s1.Heartbeat(ctx, cred, &vdibroker.HeartbeatRequest{}); err != nil {
		t.Fatal(err)
	}

	again, err := s1.Connect(ctx, pool, vhttp.ConnectRequest{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if again.SessionHost != hosts[0] {
		t.Errorf("alice through the stale server: %s, want her host %s", again.SessionHost, hosts[0])
	}
	wantAssigned(t, e, pool, map[string][]string{hosts[0]: {"alice"}})
}

// TestPersistentAutomaticStaleServerSkipsDrained_RPE1_RC2_RD3: a host
// drained through one server is not assigned to a new user through another
// whose view has not heard of the drain (R-C2: a drained host is not
// placeable, so not "the first unassigned placeable host" of R-PE1).
func TestPersistentAutomaticStaleServerSkipsDrained_RPE1_RC2_RD3(t *testing.T) {
	e := newEnvWith(t, envOptions{replicas: 2})
	ctx := context.Background()
	pool := uniq("drain")
	e.pool(pool, map[string]any{"hostPoolType": "Personal", "personalDesktopAssignmentType": "Automatic", "loadBalancerType": "Persistent"})
	hosts := e.addHosts(pool, "pd", 2)
	s1 := e.client(1, adminToken)
	if _, err := s1.Connect(ctx, pool, vhttp.ConnectRequest{User: "warmup", DryRun: true}); err != nil {
		t.Fatal(err)
	}
	drain := false
	if _, err := e.admin.PatchSessionHost(ctx, pool, hosts[0], vhttp.SessionHostRequest{AllowNewSession: &drain}); err != nil {
		t.Fatal(err)
	}
	bob, err := s1.Connect(ctx, pool, vhttp.ConnectRequest{User: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if bob.SessionHost != hosts[1] {
		t.Errorf("bob through the server that missed the drain: %s, want %s (%s is drained)", bob.SessionHost, hosts[1], hosts[0])
	}
	wantAssigned(t, e, pool, map[string][]string{hosts[1]: {"bob"}})
}

// wantAssigned checks every host's assigned users (hosts not in want: none).
func wantAssigned(t *testing.T, e *env, pool string, want map[string][]string) {
	t.Helper()
	list, err := e.admin.ListSessionHosts(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range list {
		if !slices.Equal(h.AssignedUsers, want[h.Name]) {
			t.Errorf("host %s assigned %v, want %v", h.Name, h.AssignedUsers, want[h.Name])
		}
	}
}

func persistentAutomaticRace(t *testing.T, e *env) {
	ctx := context.Background()
	for round := range 5 {
		pool := uniq("pers")
		e.pool(pool, map[string]any{"hostPoolType": "Personal", "personalDesktopAssignmentType": "Automatic", "loadBalancerType": "Persistent"})
		e.addHosts(pool, "pd", 6)
		for i := range e.srvs { // every server loads its view: they all see 6 free hosts
			if _, err := e.client(i, adminToken).Connect(ctx, pool, vhttp.ConnectRequest{User: "warmup", DryRun: true}); err != nil {
				t.Fatal(err)
			}
		}
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			answered []string
		)
		start := make(chan struct{})
		for i := range 12 {
			wg.Go(func() {
				<-start
				r, err := e.client(i%len(e.srvs), adminToken).Connect(ctx, pool, vhttp.ConnectRequest{User: "alice"})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("round %d, connect %d: %v", round, i, err)
					return
				}
				answered = append(answered, r.SessionHost)
			})
		}
		close(start)
		wg.Wait()
		hosts, err := e.admin.ListSessionHosts(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		var assigned []string
		for _, h := range hosts {
			if slices.Contains(h.AssignedUsers, "alice") {
				assigned = append(assigned, h.Name)
			}
		}
		if len(assigned) != 1 {
			t.Fatalf("round %d: alice is assigned %v; want exactly one host", round, assigned)
		}
		for _, h := range answered {
			if h != assigned[0] {
				t.Fatalf("round %d: connects answered %v; want every one on alice's host %s", round, answered, assigned[0])
			}
		}
	}
}
