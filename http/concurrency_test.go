package http_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestConcurrentConnects_RC4_RC6_SQLite: 300 concurrent connects of
// distinct users at 10 hosts × limit 10 give exactly 100 sessions and 200
// NoCapacity answers, every host at exactly 10 (R-C4); 20 concurrent
// connects of one user give one session (R-C6).
func TestConcurrentConnects_RC4_RC6_SQLite(t *testing.T) {
	concurrentConnects(t, newEnv(t))
}

// TestConcurrentConnects_RC4_RC6_RD3_Postgres3Replicas is the same against
// three servers sharing one PostgreSQL database: the database, not any
// server's view, enforces the limit and one session per user (R-D3).
func TestConcurrentConnects_RC4_RC6_RD3_Postgres3Replicas(t *testing.T) {
	dsn := postgresDSN(t)
	concurrentConnects(t, newEnvWith(t, envOptions{dsn: dsn, replicas: 3}))
}

func concurrentConnects(t *testing.T, e *env) {
	ctx := context.Background()
	pool := uniq("conc")
	e.pool(pool, map[string]any{"maxSessionLimit": 10})
	hosts := e.addHosts(pool, "ch", 10)

	// Let every replica load its view first, so they all start believing
	// they have the full 100 slots and really race.
	for i := range e.srvs {
		if _, err := e.client(i, adminToken).Connect(ctx, pool, vhttp.ConnectRequest{User: "warmup", DryRun: true}); err != nil {
			t.Fatal(err)
		}
	}

	const n = 300
	var (
		wg                    sync.WaitGroup
		mu                    sync.Mutex
		created, full, reconn int
		others                []error
		perHostAnswered       = map[string]int{}
	)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := e.client(i%len(e.srvs), adminToken)
			<-start
			r, err := c.Connect(ctx, pool, vhttp.ConnectRequest{User: fmt.Sprintf("user%03d", i)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && r.Created:
				created++
				perHostAnswered[r.SessionHost]++
			case err == nil:
				reconn++
			case vdibroker.ErrorCode(err) == vdibroker.ENoCapacity:
				full++
			default:
				others = append(others, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if created != 100 || full != 200 || reconn != 0 || len(others) != 0 {
		t.Fatalf("got %d created, %d NoCapacity, %d reconnects, other errors %v; want 100, 200, 0, none", created, full, reconn, others)
	}
	perHost := e.sessionsPerHost(pool)
	for _, h := range hosts {
		if perHost[h] != 10 || perHostAnswered[h] != 10 {
			t.Errorf("host %s: %d sessions stored, %d answered; want exactly 10", h, perHost[h], perHostAnswered[h])
		}
	}

	// 20 concurrent connects of one user, spread over the replicas.
	solo := uniq("solo")
	e.pool(solo, nil)
	e.addHosts(solo, "sh", 4)
	var ids sync.Map
	var newOnes, fails int
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.client(i%len(e.srvs), adminToken).Connect(ctx, solo, vhttp.ConnectRequest{User: "alice"})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fails++
				t.Errorf("connect %d: %v", i, err)
				return
			}
			if r.Created {
				newOnes++
			}
			ids.Store(r.SessionID, true)
		}()
	}
	wg.Wait()
	distinct := 0
	ids.Range(func(any, any) bool { distinct++; return true })
	if newOnes != 1 || distinct != 1 || fails != 0 {
		t.Errorf("one user, 20 connects: %d created, %d distinct session ids, %d failures; want 1, 1, 0", newOnes, distinct, fails)
	}
	open, err := e.admin.ListUserSessions(ctx, solo, vhttp.SessionQuery{User: "alice"})
	if err != nil || len(open) != 1 {
		t.Errorf("alice's open sessions: %v %d, want 1", err, len(open))
	}
}
