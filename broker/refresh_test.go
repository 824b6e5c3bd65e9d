package broker

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vdibroker/vdibroker"
	"github.com/vdibroker/vdibroker/store"
)

// slowHostsStore is a real store whose second ListSessionHosts (the first
// reads the view when it is first used) waits until released: a large
// pool's read on a loaded database.
type slowHostsStore struct {
	vdibroker.Store
	calls   atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (s *slowHostsStore) ListSessionHosts(ctx context.Context, pool string) ([]*vdibroker.SessionHost, error) {
	if s.calls.Add(1) == 2 {
		close(s.entered)
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.ListSessionHosts(ctx, pool)
}

// The maintenance tick reads a loaded pool view again itself, and connects
// meanwhile go on with the view they have instead of waiting for the read
// (issue 13: every 5 s a 10,000-host pool's read held up every connect of
// the pool for a quarter of a second on PostgreSQL under a full pod's load).
func TestTickRefreshesViewsBesideConnects(t *testing.T) {
	ctx := t.Context()
	st, err := store.OpenWith(ctx, "", t.TempDir(), nil, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	slow := &slowHostsStore{Store: st, entered: make(chan struct{}), release: make(chan struct{})}
	svc := New(Config{Store: slow, MaintenanceInterval: 50 * time.Millisecond})
	t.Cleanup(func() { svc.Close() })
	p := vdibroker.NewHostPool("refresh")
	p.MaxSessionLimit = 10
	if _, _, err := svc.StorePool(ctx, "refresh", nil, p, false); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"h1", "h2"} {
		if _, err := st.PutSessionHost(ctx, &vdibroker.SessionHost{HostPool: "refresh", Name: name, Address: name + ":3389",
			Protocols: []string{"RDP"}, StandardFeatures: true, AllowNewSession: true, CreateTime: time.Now().UTC()}); err != nil {
			t.Fatal(err)
		}
		heartbeat(t, svc, "refresh", name)
	}
	if _, err := svc.Connect(ctx, "refresh", vdibroker.ConnectRequest{User: "alice"}, ""); err != nil {
		t.Fatal(err) // loads the view (the first read)
	}
	select {
	case <-slow.entered:
	case <-time.After(20 * time.Second): // ticks every 50 ms; the bound is for a loaded CI machine under -race
		t.Fatal("the maintenance tick never read the loaded pool's hosts again")
	}
	// The tick's read is held: a connect answers from the view it has.
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	a, err := svc.Connect(cctx, "refresh", vdibroker.ConnectRequest{User: "bob"}, "")
	if err != nil {
		t.Fatalf("a connect while the tick re-read the pool: %v; want it answered from the view", err)
	}
	if a.SessionHost != "h1" && a.SessionHost != "h2" {
		t.Errorf("bob placed on %q", a.SessionHost)
	}
	// Once the pool is idle, the ticks read nothing (the next connect
	// reads the view): wait out the reads its last use asked for, then
	// count over several ticks.
	slow.release <- struct{}{}
	time.Sleep(300 * time.Millisecond)
	before := slow.calls.Load()
	time.Sleep(300 * time.Millisecond)
	if n := slow.calls.Load() - before; n != 0 {
		t.Errorf("an idle pool's hosts were read %d times in 6 ticks; want none", n)
	}
}
