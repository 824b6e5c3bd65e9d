package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/vdibroker/vdibroker"
	vhttp "github.com/vdibroker/vdibroker/http"
)

// TestCrashKeepsAcknowledgedConnects checks R-D2 end to end on SQLite: the
// real broker binary answers concurrent connects, is killed with SIGKILL
// while more are in flight, and after a restart on the same data dir every
// connect it answered 201 is still there, on the host it named, and the
// host's session count matches (R-S1).
func TestCrashKeepsAcknowledgedConnects(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds the binary")
	}
	dir := t.TempDir()
	bin := e2eBuild(t, dir)
	dataDir := filepath.Join(dir, "broker")
	const admin = "vdb_admin_crash_test"
	proc, base := e2eServe(t, bin, dataDir, admin)
	ctx := context.Background()
	c := vhttp.NewClient(base, admin)
	if _, err := c.PutHostPool(ctx, "crashpool", map[string]any{"loadBalancerType": "BreadthFirst", "maxSessionLimit": 1000}); err != nil {
		t.Fatal(err)
	}
	rt, err := c.CreateRegistrationToken(ctx, "crashpool", vhttp.RegistrationTokenRequest{ExpiresInSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		reg, err := c.Register(ctx, &vdibroker.RegisterRequest{Token: rt.Token, HostName: fmt.Sprintf("sh-%02d", i), Address: fmt.Sprintf("10.0.0.%d:3389", i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Heartbeat(ctx, reg.Credential, &vdibroker.HeartbeatRequest{}); err != nil {
			t.Fatal(err)
		}
	}

	// 16 clients connect distinct users until the broker dies under them.
	type ack struct{ user, id, host string }
	var (
		mu    sync.Mutex
		acked []ack
		wg    sync.WaitGroup
	)
	killAt := 200 // kill once this many connects were acknowledged
	killed := make(chan struct{})
	var once sync.Once
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				user := fmt.Sprintf("user-%02d-%04d", w, i)
				res, err := c.Connect(ctx, "crashpool", vhttp.ConnectRequest{User: user})
				if err != nil {
					return // the broker is gone (or refused): stop this client
				}
				if res.Created {
					mu.Lock()
					acked = append(acked, ack{user, res.SessionID, res.SessionHost})
					n := len(acked)
					mu.Unlock()
					if n >= killAt {
						once.Do(func() {
							proc.cmd.Process.Kill() // SIGKILL: no shutdown, no flush
							close(killed)
						})
					}
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-killed:
	default:
		t.Fatalf("clients stopped after %d acknowledged connects before the kill", len(acked))
	}
	proc.wait(t)

	_, base2 := e2eServe(t, bin, dataDir, admin)
	c2 := vhttp.NewClient(base2, admin)
	stored := map[string]*vdibroker.UserSession{}
	list, err := c2.ListUserSessions(ctx, "crashpool", vhttp.SessionQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		stored[s.ID] = s
	}
	for _, a := range acked {
		s, ok := stored[a.id]
		if !ok {
			t.Errorf("acknowledged session %s of %s lost after SIGKILL", a.id, a.user)
			continue
		}
		if s.User != a.user || s.SessionHost != a.host {
			t.Errorf("session %s = %s on %s after restart, acknowledged %s on %s", a.id, s.User, s.SessionHost, a.user, a.host)
		}
	}
	hosts, err := c2.ListSessionHosts(ctx, "crashpool")
	if err != nil {
		t.Fatal(err)
	}
	perHost := map[string]int{}
	for _, s := range list {
		perHost[s.SessionHost]++
	}
	for _, h := range hosts {
		if h.Sessions != perHost[h.Name] {
			t.Errorf("host %s counts %d sessions, %d are stored (R-S1)", h.Name, h.Sessions, perHost[h.Name])
		}
	}
	t.Logf("%d connects acknowledged before SIGKILL, %d sessions stored after restart", len(acked), len(list))
}
